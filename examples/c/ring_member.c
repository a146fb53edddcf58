/*
 * ring_member: a plain C99 peer. Joins a pccl run, keeps its ring up to date, and prints one line per
 * membership event. With --allreduce COUNT it also runs in-place float32 sum all-reduces of COUNT
 * elements in a loop (every peer contributes 1.0, so each element must come back as the world size),
 * retrying after pcclUpdateTopology when a peer is lost: the abort/retry loop a trainer runs.
 *
 *   ring_member --master HOST:PORT [--name NAME] [--run-ms N] [--heartbeat-ms N] [--timeout-ms N]
 *               [--allreduce COUNT] [--collective KIND] [--segment-bytes N] [--optimize 1]
 *
 * --collective broadcast|allgather|reducescatter runs that collective in the loop instead (in place,
 * COUNT elements per rank; runCollective() says what each peer sends and checks).
 * With --optimize 1 it calls pcclOptimizeTopology where it would call pcclUpdateTopology (its peers
 * must then do the same: every member makes the same call).
 * The shared secret comes from PCCL_SECRET or PCCL_SECRET_FILE. SIGINT/SIGTERM leave gracefully.
 * Before leaving it prints its counters (pcclGetStats) on one "NAME stats ..." line.
 * Exit status: 0 after a graceful leave, 3 when the master is lost or kicks us, 1 on other errors.
 */
#define _POSIX_C_SOURCE 200809L
#include <pccl/pccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t g_stop = 0;
static void onSignal(int sig) {
  (void)sig;
  g_stop = 1;
}

static long long nowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleepMs(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

/* The communicator's counters, as a monitoring agent would scrape them. */
static void printStats(const char* name, pcclComm_t comm) {
  pcclCommStats_t s = PCCL_COMM_STATS_INIT;
  if (pcclGetStats(comm, &s) != pcclSuccess) return;
  printf("%s stats allreduce_ops=%llu aborts=%llu retries=%llu topology_updates=%llu epoch=%llu tx_bytes=%llu "
         "rx_bytes=%llu last_allreduce_ms=%.3f last_throughput_MBps=%.1f\n",
         name, (unsigned long long)s.allreduce_ops, (unsigned long long)s.allreduce_aborts,
         (unsigned long long)s.allreduce_retries, (unsigned long long)s.topology_updates,
         (unsigned long long)s.epoch, (unsigned long long)s.tx_bytes, (unsigned long long)s.rx_bytes,
         s.last_allreduce_time_s * 1e3, s.last_allreduce_bytes_per_s / 1e6);
  fflush(stdout);
}

static int report(const char* name, const char* what, pcclResult_t r, pcclComm_t comm) {
  printf("%s error %s: %s: %s\n", name, what, pcclGetErrorString(r), pcclGetLastError(comm));
  fflush(stdout);
  return (r == pcclMasterUnreachable || r == pcclKicked) ? 3 : 1;
}

static void printRing(const char* name, const char* event, pcclComm_t comm) {
  int64_t epoch = 0, world = 0, rank = 0;
  pcclGetAttribute(comm, PCCL_ATTR_EPOCH, &epoch);
  pcclGetAttribute(comm, PCCL_ATTR_WORLD_SIZE, &world);
  pcclGetAttribute(comm, PCCL_ATTR_RANK, &rank);
  printf("%s %s epoch=%lld world=%lld rank=%lld\n", name, event, (long long)epoch, (long long)world,
         (long long)rank);
  fflush(stdout);
}

/* The largest group an all-gather or reduce-scatter of this program runs in. */
enum { kMaxWorld = 16 };

/* One in-place float32 collective of `count` elements (per rank for all-gather and reduce-scatter) with
 * inputs every peer can check: all-reduce sums ones (-> group size); broadcast from rank 0, whose
 * buffer holds 1 and the others' their rank + 2 (-> 1); all-gather of blocks holding rank + 1 (block b
 * -> b + 1); reduce-scatter of ones (-> group size). *bad counts wrong elements. */
static pcclResult_t runCollective(const char* kind, float* data, long count, pcclComm_t comm, pcclReduceInfo_t* info,
                                  long* bad) {
  int64_t world = 1, rank = 0;
  long k, n = count;
  pcclResult_t r;
  pcclGetAttribute(comm, PCCL_ATTR_GROUP_WORLD_SIZE, &world);
  pcclGetAttribute(comm, PCCL_ATTR_GROUP_RANK, &rank);
  if (world < 1) world = 1;
  if (world > kMaxWorld) return pcclInvalidUsage;
  if (strcmp(kind, "broadcast") == 0) {
    for (k = 0; k < n; ++k) data[k] = rank == 0 ? 1.0f : (float)(rank + 2);
    r = pcclBroadcast(data, data, (size_t)n, pcclFloat32, 0, NULL, comm, info);
    for (k = 0; r == pcclSuccess && k < n; ++k) *bad += data[k] != 1.0f;
  } else if (strcmp(kind, "allgather") == 0) {
    float* own = data + rank * count;
    for (k = 0; k < count * world; ++k) data[k] = 0.0f;
    for (k = 0; k < count; ++k) own[k] = (float)(rank + 1);
    r = pcclAllGather(own, data, (size_t)count, pcclFloat32, NULL, comm, info);
    for (k = 0; r == pcclSuccess && k < count * world; ++k) *bad += data[k] != (float)(k / count + 1);
  } else if (strcmp(kind, "reducescatter") == 0) {
    float* own = data + rank * count;
    for (k = 0; k < count * world; ++k) data[k] = 1.0f;
    r = pcclReduceScatter(data, own, (size_t)count, pcclFloat32, pcclSum, NULL, comm, info);
    for (k = 0; r == pcclSuccess && k < count; ++k) *bad += own[k] != (float)info->world_size;
  } else {
    for (k = 0; k < n; ++k) data[k] = 1.0f;
    r = pcclAllReduce(data, data, (size_t)n, pcclFloat32, pcclSum, NULL, comm, info);
    for (k = 0; r == pcclSuccess && k < n; ++k) *bad += data[k] != (float)info->world_size;
  }
  return r;
}

int main(int argc, char** argv) {
  const char* master = NULL;
  const char* name = "peer";
  const char* kind = "allreduce";
  long run_ms = -1;
  long heartbeat_ms = 1000, timeout_ms = 10000;
  long count = 0, segment_bytes = 0, optimize = 0;
  int i;
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--master") == 0) master = argv[i + 1];
    else if (strcmp(argv[i], "--name") == 0) name = argv[i + 1];
    else if (strcmp(argv[i], "--run-ms") == 0) run_ms = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--heartbeat-ms") == 0) heartbeat_ms = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--timeout-ms") == 0) timeout_ms = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--allreduce") == 0) count = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--collective") == 0) kind = argv[i + 1];
    else if (strcmp(argv[i], "--segment-bytes") == 0) segment_bytes = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--optimize") == 0) optimize = atol(argv[i + 1]);
    else break;
  }
  if (master == NULL || i < argc || count < 0) {
    fprintf(stderr,
            "usage: %s --master HOST:PORT [--name NAME] [--run-ms N] [--heartbeat-ms N] [--timeout-ms N]\n"
            "          [--allreduce COUNT] [--collective allreduce|broadcast|allgather|reducescatter]\n"
            "          [--segment-bytes N] [--optimize 1]\n",
            argv[0]);
    return 2;
  }
  signal(SIGINT, onSignal);
  signal(SIGTERM, onSignal);

  pcclCommConfig_t config = PCCL_COMM_CONFIG_INIT;
  config.master_address = master;
  config.listen_address = "127.0.0.1:0";
  config.heartbeat_interval_ms = (uint32_t)heartbeat_ms;
  config.peer_timeout_ms = (uint32_t)timeout_ms;
  if (segment_bytes > 0) config.segment_bytes = (uint32_t)segment_bytes;
  pcclComm_t comm = NULL;
  pcclResult_t r = pcclCommCreate(&config, &comm);
  if (r != pcclSuccess) return report(name, "pcclCommCreate", r, NULL);

  r = pcclConnect(comm);
  if (r != pcclSuccess) {
    int code = report(name, "pcclConnect", r, comm);
    pcclCommDestroy(comm);
    return code;
  }
  printRing(name, "connected", comm);

  float* data = NULL;
  if (count > 0) {
    /* room for an all-gather's or reduce-scatter's group size x COUNT elements */
    data = (float*)malloc((size_t)count * sizeof(float) * kMaxWorld);
    if (data == NULL) return report(name, "malloc", pcclSystemError, comm);
  }
  long long start = nowMs();
  long iteration = 0;
  int status = 0;
  while (!g_stop && (run_ms < 0 || nowMs() - start < run_ms)) {
    int pending = 0;
    r = pcclArePeersPending(comm, &pending);
    if (r != pcclSuccess) {
      status = report(name, "pcclArePeersPending", r, comm);
      break;
    }
    if (pending) {
      r = optimize ? pcclOptimizeTopology(comm) : pcclUpdateTopology(comm);
      if (r == pcclSuccess) {
        printRing(name, "ring", comm);
      } else if (r == pcclPeerLost || r == pcclTimeout) {
        report(name, "pcclUpdateTopology (will retry)", r, comm);
      } else {
        status = report(name, "pcclUpdateTopology", r, comm);
        break;
      }
    }
    if (data == NULL) {
      sleepMs(50); /* a trainer would run a training step here */
      continue;
    }
    pcclReduceInfo_t info;
    long bad = 0;
    r = runCollective(kind, data, count, comm, &info, &bad);
    if (r == pcclSuccess) {
      printf("%s %s %ld ok world=%u wrong=%ld time_ms=%.3f\n", name, kind, ++iteration, info.world_size, bad,
             info.time_s * 1e3);
      fflush(stdout);
      if (bad != 0) {
        status = 1;
        break;
      }
    } else if (r == pcclPeerLost || r == pcclTopologyChanged || r == pcclTimeout) {
      report(name, "collective (will update the topology and retry)", r, comm);
      r = optimize ? pcclOptimizeTopology(comm) : pcclUpdateTopology(comm);
      if (r == pcclSuccess) printRing(name, "ring", comm);
    } else {
      status = report(name, kind, r, comm);
      break;
    }
  }
  free(data);
  printStats(name, comm);
  pcclCommDestroy(comm);
  if (status == 0) {
    printf("%s left\n", name);
    fflush(stdout);
  }
  return status;
}
