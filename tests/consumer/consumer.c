/* A C99 program built against an installed pccl (find_package(pccl), or pkg-config pccl): an embedded
 * master on 127.0.0.1 (port 0), two communicators on two threads, one all-reduce of a few floats,
 * every element checked. Prints "consumer ok" and exits 0 on success; exit 1 and the reason otherwise.
 * Every pccl call that waits has a deadline (the timeouts below), so the program always ends. */
#define _POSIX_C_SOURCE 200809L
#include <pccl/pccl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define PEERS 2
#define COUNT 7
#define SECRET "consumer-secret"

typedef struct {
  int seed;              /* element i of this peer's input is seed * (i + 1) */
  pcclMaster_t master;   /* to wait for the other peer without polling */
  const char* address;   /* "127.0.0.1:PORT" of the master */
  int ok;
  char why[512];
} Peer;

static int failed(Peer* p, const char* what, pcclResult_t r, pcclComm_t comm) {
  snprintf(p->why, sizeof p->why, "peer %d: %s: %s (%s)", p->seed, what, pcclGetErrorString(r),
           pcclGetLastError(comm));
  return 0;
}

/* One peer's whole life: create, join (the first one admitted lets the second in), all-reduce, leave. */
static int runPeer(Peer* p, pcclComm_t* comm) {
  pcclCommConfig_t config = PCCL_COMM_CONFIG_INIT;
  pcclCommStats_t stats = PCCL_COMM_STATS_INIT;
  float data[COUNT];
  int64_t world = 0;
  pcclResult_t r;
  int i;

  config.master_address = p->address;
  config.listen_address = "127.0.0.1:0";
  config.secret = SECRET;
  config.secret_len = strlen(SECRET);
  config.heartbeat_interval_ms = 200;
  config.peer_timeout_ms = 5000;
  config.connect_timeout_ms = 30000;
  config.op_timeout_ms = 30000;
  if ((r = pcclCommCreate(&config, comm)) != pcclSuccess) return failed(p, "pcclCommCreate", r, NULL);
  if ((r = pcclConnect(*comm)) != pcclSuccess) return failed(p, "pcclConnect", r, *comm);
  if ((r = pcclGetAttribute(*comm, PCCL_ATTR_WORLD_SIZE, &world)) != pcclSuccess)
    return failed(p, "pcclGetAttribute", r, *comm);
  if (world == 1) {
    /* Admitted first: once the other peer waits for admission, vote it in. */
    if ((r = pcclMasterWaitForPeers(p->master, 1, 1, 30000)) != pcclSuccess)
      return failed(p, "pcclMasterWaitForPeers", r, NULL);
    if ((r = pcclUpdateTopology(*comm)) != pcclSuccess) return failed(p, "pcclUpdateTopology", r, *comm);
  }
  if ((r = pcclGetAttribute(*comm, PCCL_ATTR_WORLD_SIZE, &world)) != pcclSuccess || world != PEERS) {
    snprintf(p->why, sizeof p->why, "peer %d: world size %ld, expected %d", p->seed, (long)world, PEERS);
    return 0;
  }

  for (i = 0; i < COUNT; ++i) data[i] = (float)(p->seed * (i + 1));
  if ((r = pcclAllReduce(data, data, COUNT, pcclFloat32, pcclSum, NULL, *comm, NULL)) != pcclSuccess)
    return failed(p, "pcclAllReduce", r, *comm);
  for (i = 0; i < COUNT; ++i) {
    float want = (float)(3 * (i + 1)); /* seeds 1 and 2 */
    if (data[i] != want) {
      snprintf(p->why, sizeof p->why, "peer %d: element %d is %g, expected %g", p->seed, i, (double)data[i],
               (double)want);
      return 0;
    }
  }
  if ((r = pcclGetStats(*comm, &stats)) != pcclSuccess) return failed(p, "pcclGetStats", r, *comm);
  if (stats.allreduce_ops != 1) {
    snprintf(p->why, sizeof p->why, "peer %d: %lu all-reduces counted, expected 1", p->seed,
             (unsigned long)stats.allreduce_ops);
    return 0;
  }
  return 1;
}

static void* peerThread(void* arg) {
  Peer* p = (Peer*)arg;
  pcclComm_t comm = NULL;
  pcclResult_t r;
  p->ok = runPeer(p, &comm);
  if ((r = pcclCommDestroy(comm)) != pcclSuccess && p->ok) p->ok = failed(p, "pcclCommDestroy", r, NULL);
  return NULL;
}

int main(void) {
  pcclMasterConfig_t mc = PCCL_MASTER_CONFIG_INIT;
  pcclMaster_t master = NULL;
  pthread_t threads[PEERS];
  Peer peers[PEERS];
  char address[64];
  uint16_t port = 0;
  int version = 0, i, ok = 1;
  pcclResult_t r;

  if ((r = pcclGetVersion(&version)) != pcclSuccess || version != PCCL_VERSION_CODE) {
    fprintf(stderr, "consumer: libpccl reports version %d, the header says %d (%s)\n", version,
            PCCL_VERSION_CODE, PCCL_VERSION_STRING);
    return 1;
  }
  mc.listen_address = "127.0.0.1:0";
  mc.secret = SECRET;
  mc.secret_len = strlen(SECRET);
  mc.heartbeat_interval_ms = 200;
  mc.peer_timeout_ms = 5000;
  if ((r = pcclMasterCreate(&mc, &master)) != pcclSuccess || (r = pcclMasterStart(master)) != pcclSuccess ||
      (r = pcclMasterGetPort(master, &port)) != pcclSuccess) {
    fprintf(stderr, "consumer: master: %s (%s)\n", pcclGetErrorString(r), pcclGetLastError(NULL));
    pcclMasterDestroy(master);
    return 1;
  }
  snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port);

  for (i = 0; i < PEERS; ++i) {
    memset(&peers[i], 0, sizeof peers[i]);
    peers[i].seed = i + 1;
    peers[i].master = master;
    peers[i].address = address;
    if (pthread_create(&threads[i], NULL, peerThread, &peers[i]) != 0) {
      fprintf(stderr, "consumer: pthread_create failed\n");
      return 1; /* the peers already started end by their deadlines; the process exits anyway */
    }
  }
  for (i = 0; i < PEERS; ++i) {
    pthread_join(threads[i], NULL);
    if (!peers[i].ok) {
      fprintf(stderr, "consumer: %s\n", peers[i].why);
      ok = 0;
    }
  }
  if (pcclMasterStop(master) != pcclSuccess || pcclMasterDestroy(master) != pcclSuccess) {
    fprintf(stderr, "consumer: stopping the master failed\n");
    ok = 0;
  }
  if (!ok) return 1;
  printf("consumer ok (libpccl %s, %d peers, %d floats)\n", PCCL_VERSION_STRING, PEERS, COUNT);
  return 0;
}
