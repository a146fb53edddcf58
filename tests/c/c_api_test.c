/* The C API from a C99 program: every function of pccl.h. An embedded master, two peers (one on a
 * second thread), the connect -> update -> all-reduce -> shared-state sync -> destroy flow,
 * attributes, regions, counters, a wait with a time limit, an aborted and retried operation, version, and
 * argument checking.
 * Exit 0 = pass. */
#define _POSIX_C_SOURCE 200809L
#include <pccl/pccl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int g_failures = 0;
#define EXPECT(cond)                                                    \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: EXPECT(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                     \
    }                                                                   \
  } while (0)

static char g_address[64];

static pcclComm_t makeComm(const char* region) {
  pcclCommConfig_t c = PCCL_COMM_CONFIG_INIT;
  pcclComm_t comm = NULL;
  c.master_address = g_address;
  c.region = region;
  c.listen_address = "127.0.0.1:0";
  c.secret = "c-secret";
  c.secret_len = strlen("c-secret");
  c.heartbeat_interval_ms = 100;
  c.peer_timeout_ms = 1000;
  c.connect_timeout_ms = 10000;
  c.inbound = region == NULL ? 0 : -1; /* b declares that it cannot be dialled (loopback reaches it anyway) */
  EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
  return comm;
}

/* Peer b's side of the all-reduces: a blocking one, then an async one tested and waited on. */
static void* reduceOnB(void* arg) {
  pcclComm_t comm = (pcclComm_t)arg;
  float x[1001];
  double y[3] = {1.5, -2.0, 4.0};
  pcclReduceOptions_t opts = PCCL_REDUCE_OPTIONS_INIT;
  pcclReduceInfo_t info;
  pcclRequest_t req = NULL;
  int i, done = -1;
  for (i = 0; i < 1001; ++i) x[i] = (float)i;
  opts.tag = 5;
  EXPECT(pcclAllReduce(x, x, 1001, pcclFloat32, pcclSum, &opts, comm, &info) == pcclSuccess);
  EXPECT(info.world_size == 2 && info.tx_bytes > 0 && info.time_s > 0);
  for (i = 0; i < 1001; ++i) EXPECT(x[i] == (float)(3 * i));
  opts.tag = 6;
  EXPECT(pcclAllReduceAsync(y, y, 3, pcclFloat64, pcclMax, &opts, comm, &req) == pcclSuccess);
  EXPECT(pcclTest(req, &done) == pcclSuccess);
  EXPECT(pcclWait(req, NULL) == pcclSuccess);
  EXPECT(y[0] == 1.5 && y[1] == 0.0 && y[2] == 4.0);
  return NULL;
}

/* One peer's side of the other collectives (both peers run it; group ranks 0 and 1): a broadcast from
 * rank 1 in place, an all-gather out of place, an async reduce-scatter in place, a barrier. */
static void* collectivesOn(void* arg) {
  pcclComm_t comm = (pcclComm_t)arg;
  int64_t rank = -1;
  float bcast[300], mine[100], gathered[200], rs[200];
  pcclReduceOptions_t opts = PCCL_REDUCE_OPTIONS_INIT;
  pcclReduceInfo_t info;
  pcclRequest_t req = NULL;
  int i;
  EXPECT(pcclGetAttribute(comm, PCCL_ATTR_GROUP_RANK, &rank) == pcclSuccess);
  for (i = 0; i < 300; ++i) bcast[i] = rank == 1 ? (float)i : -1.0f;
  for (i = 0; i < 100; ++i) mine[i] = (float)(rank * 1000 + i);
  for (i = 0; i < 200; ++i) rs[i] = (float)(i + rank);
  opts.tag = 20;
  EXPECT(pcclBroadcast(bcast, bcast, 300, pcclFloat32, 1, &opts, comm, &info) == pcclSuccess);
  EXPECT(info.world_size == 2);
  for (i = 0; i < 300; ++i) EXPECT(bcast[i] == (float)i);
  opts.tag = 21;
  EXPECT(pcclAllGather(mine, gathered, 100, pcclFloat32, &opts, comm, NULL) == pcclSuccess);
  for (i = 0; i < 200; ++i) EXPECT(gathered[i] == (float)((i / 100) * 1000 + i % 100));
  opts.tag = 22;
  EXPECT(pcclReduceScatterAsync(rs, rs + rank * 100, 100, pcclFloat32, pcclSum, &opts, comm, &req) == pcclSuccess);
  EXPECT(pcclWait(req, NULL) == pcclSuccess);
  for (i = 0; i < 100; ++i) EXPECT(rs[rank * 100 + i] == (float)(2 * (rank * 100 + i) + 1));
  opts.tag = 23;
  EXPECT(pcclBarrier(&opts, comm) == pcclSuccess);
  EXPECT(pcclBarrierAsync(NULL, comm, &req) == pcclSuccess);
  EXPECT(pcclWait(req, NULL) == pcclSuccess);
  /* Arguments: a root outside the group, a misplaced in-place block. */
  EXPECT(pcclBroadcast(bcast, bcast, 300, pcclFloat32, 2, NULL, comm, NULL) == pcclInvalidArgument);
  EXPECT(strstr(pcclGetLastError(comm), "root 2") != NULL);
  EXPECT(pcclAllGather(gathered + 1, gathered, 100, pcclFloat32, NULL, comm, NULL) == pcclInvalidArgument);
  return NULL;
}

/* Shared state of two tensors: weights (float32) and a step counter (int64). */
static pcclSharedState_t twoTensors(pcclTensorInfo_t t[2], float* weights, size_t count, int64_t* step) {
  pcclSharedState_t st = PCCL_SHARED_STATE_INIT;
  t[0].name = "weights";
  t[0].dtype = pcclFloat32;
  t[0].count = count;
  t[0].data = weights;
  t[1].name = "step";
  t[1].dtype = pcclInt64;
  t[1].count = 1;
  t[1].data = step;
  st.count = 2;
  st.infos = t;
  return st;
}

/* Shared state: b is at revision 0 with other weights and a different step; a is at revision 3. */
static float g_weights_b[5000];
static int64_t g_step_b = 0;
static pcclSyncInfo_t g_info_b;
static pcclResult_t g_sync_b = pcclInternalError;
static void* syncOnB(void* arg) {
  pcclComm_t comm = (pcclComm_t)arg;
  pcclTensorInfo_t t[2];
  pcclSharedState_t st = twoTensors(t, g_weights_b, 5000, &g_step_b);
  st.compress = 1;
  g_sync_b = pcclSyncSharedState(comm, &st, pcclSyncEnforcePopular, &g_info_b);
  if (g_sync_b == pcclSuccess && st.revision != 3) g_sync_b = pcclInternalError;
  return NULL;
}

static void* joinLate(void* arg) {
  pcclComm_t comm = (pcclComm_t)arg;
  pcclResult_t r = pcclConnect(comm);
  if (r != pcclSuccess) fprintf(stderr, "late connect: %s: %s\n", pcclGetErrorString(r), pcclGetLastError(comm));
  EXPECT(r == pcclSuccess);
  return NULL;
}

static pcclResult_t g_optimize_b = pcclInternalError;
static void* optimizeOnB(void* arg) {
  g_optimize_b = pcclOptimizeTopology((pcclComm_t)arg);
  return NULL;
}

int main(void) {
  pcclMasterConfig_t mc = PCCL_MASTER_CONFIG_INIT;
  pcclMaster_t master = NULL;
  uint16_t port = 0;
  pcclComm_t a, b;
  pthread_t thread;
  int pending = -1;
  int64_t v = -1;

  /* The library is the one this header describes. */
  {
    int version = -1;
    EXPECT(pcclGetVersion(&version) == pcclSuccess && version == PCCL_VERSION_CODE);
    EXPECT(pcclGetVersion(NULL) == pcclInvalidArgument);
    EXPECT(PCCL_VERSION_CODE == PCCL_VERSION_MAJOR * 10000 + PCCL_VERSION_MINOR * 100 + PCCL_VERSION_PATCH);
    EXPECT(strlen(PCCL_VERSION_STRING) >= 5);
  }
  /* Every code has a name; an unknown value too. */
  {
    int code;
    for (code = pcclSuccess; code <= pcclTopologyChanged; ++code) {
      const char* name = pcclGetErrorString((pcclResult_t)code);
      EXPECT(name != NULL && strlen(name) > 0 && strcmp(name, "unknown pcclResult_t value") != 0);
    }
    EXPECT(strcmp(pcclGetErrorString((pcclResult_t)1234), "unknown pcclResult_t value") == 0);
  }

  /* master_reconnect_ms: checked; a struct from the header before it was appended is accepted. */
  {
    pcclCommConfig_t c = PCCL_COMM_CONFIG_INIT;
    pcclComm_t comm = NULL;
    c.master_address = "127.0.0.1:1,127.0.0.1:2";
    c.listen_address = "127.0.0.1:0";
    EXPECT(c.master_reconnect_ms == -1);
    c.master_reconnect_ms = -5;
    EXPECT(pcclCommCreate(&c, &comm) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "master_reconnect_ms") != NULL);
    c.master_reconnect_ms = 0;
    c.struct_size = (uint32_t)offsetof(pcclCommConfig_t, master_reconnect_ms);
    EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
    EXPECT(pcclCommDestroy(comm) == pcclSuccess);
    c.struct_size = (uint32_t)sizeof(pcclCommConfig_t);
    c.master_address = "127.0.0.1:1,,127.0.0.1:2";
    EXPECT(pcclCommCreate(&c, &comm) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "empty entry") != NULL);
  }
  /* region: NULL by default, checked at create; a struct from the header before it is accepted. */
  {
    pcclCommConfig_t c = PCCL_COMM_CONFIG_INIT;
    pcclComm_t comm = NULL;
    char name[PCCL_MAX_REGION_LEN + 2];
    size_t length = 99;
    c.master_address = "127.0.0.1:1";
    c.listen_address = "127.0.0.1:0";
    EXPECT(c.region == NULL);
    c.region = "eu west";
    EXPECT(pcclCommCreate(&c, &comm) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "region 'eu west'") != NULL);
    memset(name, 'r', sizeof name);
    name[PCCL_MAX_REGION_LEN + 1] = '\0'; /* one byte too long */
    c.region = name;
    EXPECT(pcclCommCreate(&c, &comm) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "at most 64 bytes") != NULL);
    c.region = "auto-1";
    EXPECT(pcclCommCreate(&c, &comm) == pcclInvalidArgument);
    name[PCCL_MAX_REGION_LEN] = '\0'; /* the longest name */
    c.region = name;
    EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
    EXPECT(pcclGetRegion(comm, 0, name, sizeof name, &length) == pcclInvalidUsage); /* no ring yet */
    EXPECT(strstr(pcclGetLastError(NULL), "pcclConnect") != NULL);
    EXPECT(pcclCommDestroy(comm) == pcclSuccess);
    c.region = "eu west"; /* not read: the struct ends before region */
    c.struct_size = (uint32_t)offsetof(pcclCommConfig_t, region);
    EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
    EXPECT(pcclCommDestroy(comm) == pcclSuccess);
    /* algorithm (protocol 12): checked at create; a struct of protocol 11 ends before it. */
    c.struct_size = (uint32_t)sizeof(pcclCommConfig_t);
    c.region = NULL;
    c.algorithm = "tree";
    EXPECT(pcclCommCreate(&c, &comm) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "hierarchical") != NULL);
    c.algorithm = "hierarchical";
    EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
    EXPECT(pcclGetAttribute(comm, PCCL_ATTR_HIERARCHICAL, &v) == pcclSuccess && v == 0); /* no ring yet */
    EXPECT(pcclCommDestroy(comm) == pcclSuccess);
    c.algorithm = "tree"; /* not read */
    c.struct_size = (uint32_t)offsetof(pcclCommConfig_t, algorithm);
    EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
    EXPECT(pcclCommDestroy(comm) == pcclSuccess);
    /* gather_bytes: -1 by default, 0..4 MiB, checked at create; a struct of protocol 12 ends before it. */
    c.struct_size = (uint32_t)sizeof(pcclCommConfig_t);
    c.algorithm = NULL;
    {
      pcclCommConfig_t fresh = PCCL_COMM_CONFIG_INIT;
      EXPECT(fresh.gather_bytes == -1);
    }
    c.gather_bytes = 4194305;
    EXPECT(pcclCommCreate(&c, &comm) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "gather_bytes") != NULL);
    c.gather_bytes = -2;
    EXPECT(pcclCommCreate(&c, &comm) == pcclInvalidArgument);
    c.gather_bytes = 0;
    EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
    EXPECT(pcclCommDestroy(comm) == pcclSuccess);
    c.gather_bytes = 4194305; /* not read */
    c.struct_size = (uint32_t)offsetof(pcclCommConfig_t, gather_bytes);
    EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
    EXPECT(pcclCommDestroy(comm) == pcclSuccess);
    c.struct_size = (uint32_t)sizeof(pcclCommConfig_t);
    c.gather_bytes = -1;
    /* inbound: -1 by default, else 0 or 1; a struct of protocol 19 ends before it. */
    int inbound_value = -1;
    {
      pcclCommConfig_t fresh = PCCL_COMM_CONFIG_INIT;
      EXPECT(fresh.inbound == -1);
    }
    c.inbound = 2;
    EXPECT(pcclCommCreate(&c, &comm) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "inbound") != NULL);
    c.inbound = 0;
    EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
    EXPECT(pcclGetInbound(comm, 0, &inbound_value) == pcclInvalidUsage); /* no ring yet */
    EXPECT(pcclCommDestroy(comm) == pcclSuccess);
    c.inbound = 7; /* not read */
    c.struct_size = (uint32_t)offsetof(pcclCommConfig_t, inbound);
    EXPECT(pcclCommCreate(&c, &comm) == pcclSuccess);
    EXPECT(pcclCommDestroy(comm) == pcclSuccess);
    c.struct_size = (uint32_t)sizeof(pcclCommConfig_t);
    c.inbound = -1;
  }

  /* Arguments are checked, with a useful message. */
  EXPECT(pcclMasterCreate(NULL, &master) == pcclInvalidArgument);
  EXPECT(strstr(pcclGetLastError(NULL), "config") != NULL);
  EXPECT(pcclConnect(NULL) == pcclInvalidArgument);
  EXPECT(pcclGetAttribute((pcclComm_t)&mc, PCCL_ATTR_RANK, &v) == pcclInvalidArgument);
  EXPECT(strcmp(pcclGetErrorString(pcclAuthFailed), "authentication failed") == 0);
  {
    pcclMasterConfig_t bad = mc;
    bad.struct_size = 3;
    EXPECT(pcclMasterCreate(&bad, &master) == pcclInvalidArgument);
    /* A struct from the header before the probe fields were appended: accepted, they keep defaults. */
    bad.struct_size = (uint32_t)offsetof(pcclMasterConfig_t, probe_budget_ms);
    EXPECT(pcclMasterCreate(&bad, &master) == pcclSuccess);
    EXPECT(pcclMasterDestroy(master) == pcclSuccess);
    master = NULL;
    bad = mc;
    bad.auto_optimize = 7;
    EXPECT(pcclMasterCreate(&bad, &master) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "auto_optimize") != NULL);
    /* A struct from the header before the failover fields: accepted, they keep their defaults. */
    bad = mc;
    bad.struct_size = (uint32_t)offsetof(pcclMasterConfig_t, standby);
    EXPECT(pcclMasterCreate(&bad, &master) == pcclSuccess);
    EXPECT(pcclMasterDestroy(master) == pcclSuccess);
    master = NULL;
    /* etcd elects the leader: it does not go with standby. */
    bad = mc;
    bad.etcd_url = "http://127.0.0.1:1";
    bad.standby = 1;
    EXPECT(pcclMasterCreate(&bad, &master) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "standby") != NULL);
    bad.standby = 0;
    bad.etcd_lease_ms = 10;
    EXPECT(pcclMasterCreate(&bad, &master) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "etcd_lease_ms") != NULL);
    bad = mc;
    bad.rebuild_window_ms = 0;
    EXPECT(pcclMasterCreate(&bad, &master) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "rebuild_window_ms") != NULL);
    /* A standby master leads nothing until a member of a run comes back to it. */
    bad = mc;
    bad.listen_address = "127.0.0.1:0";
    bad.standby = 1;
    EXPECT(pcclMasterCreate(&bad, &master) == pcclSuccess);
    EXPECT(pcclMasterStart(master) == pcclSuccess);
    {
      pcclMasterStats_t ss = PCCL_MASTER_STATS_INIT;
      EXPECT(pcclMasterGetStats(master, &ss) == pcclSuccess);
      EXPECT(ss.role == 1 && ss.term == 0 && ss.takeovers == 0);
      /* A struct from the header before the role fields: filled up to join_order_bottleneck. */
      ss.struct_size = (uint32_t)offsetof(pcclMasterStats_t, role);
      ss.role = 77;
      EXPECT(pcclMasterGetStats(master, &ss) == pcclSuccess && ss.role == 77);
      /* One from the header before unreachable: filled up to step_downs. */
      ss.struct_size = (uint32_t)offsetof(pcclMasterStats_t, unreachable);
      ss.unreachable = 77;
      EXPECT(pcclMasterGetStats(master, &ss) == pcclSuccess && ss.role == 1 && ss.unreachable == 77);
      ss.struct_size = (uint32_t)sizeof(pcclMasterStats_t);
      EXPECT(pcclMasterGetStats(master, &ss) == pcclSuccess && ss.unreachable == 0);
    }
    EXPECT(pcclMasterDestroy(master) == pcclSuccess);
    master = NULL;
  }

  mc.listen_address = "127.0.0.1:0";
  mc.secret = "c-secret";
  mc.secret_len = strlen("c-secret");
  mc.heartbeat_interval_ms = 100;
  mc.peer_timeout_ms = 1000;
  mc.probe_budget_ms = 200; /* pcclOptimizeTopology below: short link surveys */
  mc.probe_bytes = 1u << 20;
  EXPECT(pcclMasterCreate(&mc, &master) == pcclSuccess);
  EXPECT(pcclMasterGetPort(master, &port) == pcclInvalidUsage); /* not started yet */
  EXPECT(pcclMasterStart(master) == pcclSuccess);
  EXPECT(pcclMasterGetPort(master, &port) == pcclSuccess && port != 0);
  snprintf(g_address, sizeof g_address, "127.0.0.1:%u", (unsigned)port);

  a = makeComm("c-region_1.a");
  b = makeComm(NULL); /* declares none */
  EXPECT(pcclUpdateTopology(a) == pcclInvalidUsage); /* not connected yet */
  EXPECT(strlen(pcclGetLastError(a)) > 0);
  {
    pcclCommStats_t s = PCCL_COMM_STATS_INIT;
    EXPECT(pcclGetStats(a, &s) == pcclSuccess);
    EXPECT(s.allreduce_ops == 0 && s.topology_updates == 0 && s.tx_bytes == 0 && s.epoch == 0);
    EXPECT(pcclGetStats(a, NULL) == pcclInvalidArgument);
    s.struct_size = 8;
    EXPECT(pcclGetStats(a, &s) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(a), "PCCL_COMM_STATS_INIT") != NULL); /* recorded on the communicator */
  }
  EXPECT(pcclConnect(a) == pcclSuccess);
  EXPECT(pcclGetAttribute(a, PCCL_ATTR_WORLD_SIZE, &v) == pcclSuccess && v == 1);
  EXPECT(pcclGetAttribute(a, PCCL_ATTR_EPOCH, &v) == pcclSuccess && v == 1);
  EXPECT(pcclGetAttribute(a, PCCL_ATTR_RING_CONNECTIONS, &v) == pcclSuccess && v == 0); /* alone */

  pthread_create(&thread, NULL, joinLate, b);
  EXPECT(pcclMasterWaitForPeers(master, 1, 1, 5000) == pcclSuccess); /* b is pending */
  EXPECT(pcclArePeersPending(a, &pending) == pcclSuccess && pending == 1);
  EXPECT(pcclMasterWaitForPeers(master, 5, 0, 10) == pcclTimeout);
  EXPECT(strstr(pcclGetLastError(NULL), "1 accepted") != NULL);
  EXPECT(pcclUpdateTopology(a) == pcclSuccess);
  pthread_join(thread, NULL);

  EXPECT(pcclGetAttribute(a, PCCL_ATTR_WORLD_SIZE, &v) == pcclSuccess && v == 2);
  EXPECT(pcclGetAttribute(b, PCCL_ATTR_GROUP_WORLD_SIZE, &v) == pcclSuccess && v == 2);
  /* both on loopback: the default same_host_connections (1), not a pool of connections_per_peer 0 (32) */
  EXPECT(pcclGetAttribute(a, PCCL_ATTR_RING_CONNECTIONS, &v) == pcclSuccess && v == 1);
  {
    int64_t ra = -1, rb = -1, ea = -1, eb = -1;
    pcclGetAttribute(a, PCCL_ATTR_RANK, &ra);
    pcclGetAttribute(b, PCCL_ATTR_RANK, &rb);
    pcclGetAttribute(a, PCCL_ATTR_EPOCH, &ea);
    pcclGetAttribute(b, PCCL_ATTR_EPOCH, &eb);
    EXPECT(ra != rb && ea == eb && ea == 2);
  }
  EXPECT(pcclArePeersPending(a, &pending) == pcclSuccess && pending == 0);
  /* pcclGetRegion: a declared its region, b none (nothing measured yet: the unnamed region ""). */
  {
    int64_t ra = -1;
    char buf[PCCL_MAX_REGION_LEN + 1];
    size_t length = 0;
    pcclGetAttribute(a, PCCL_ATTR_RANK, &ra);
    EXPECT(pcclGetRegion(b, (uint32_t)ra, buf, sizeof buf, &length) == pcclSuccess);
    EXPECT(strcmp(buf, "c-region_1.a") == 0 && length == strlen("c-region_1.a"));
    EXPECT(pcclGetRegion(a, (uint32_t)(1 - ra), buf, sizeof buf, &length) == pcclSuccess);
    EXPECT(strcmp(buf, "") == 0 && length == 0);
    length = 0;
    EXPECT(pcclGetRegion(a, (uint32_t)ra, NULL, 0, &length) == pcclSuccess && length == 12); /* a size query */
    EXPECT(pcclGetRegion(a, (uint32_t)ra, buf, 12, &length) == pcclInvalidArgument); /* no room for the NUL */
    EXPECT(length == 12 && buf[0] == '\0');
    EXPECT(strstr(pcclGetLastError(a), "needs 13") != NULL);
    EXPECT(pcclGetRegion(a, (uint32_t)ra, buf, 13, &length) == pcclSuccess && strcmp(buf, "c-region_1.a") == 0);
    EXPECT(pcclGetRegion(a, 2, buf, sizeof buf, &length) == pcclInvalidArgument); /* 2 members */
    EXPECT(strstr(pcclGetLastError(a), "rank 2") != NULL);
    EXPECT(pcclGetRegion(a, 0, buf, sizeof buf, NULL) == pcclInvalidArgument);
    EXPECT(pcclGetRegion(a, 0, NULL, 4, &length) == pcclInvalidArgument);
    EXPECT(pcclGetRegion(NULL, 0, buf, sizeof buf, &length) == pcclInvalidArgument);
    /* pcclGetInbound: b declared inbound = 0; a's port answered the master's dial-back. */
    {
      int in = -1;
      EXPECT(pcclGetInbound(b, (uint32_t)ra, &in) == pcclSuccess && in == 1);
      EXPECT(pcclGetInbound(a, (uint32_t)(1 - ra), &in) == pcclSuccess && in == 0);
      EXPECT(pcclGetInbound(a, 2, &in) == pcclInvalidArgument);
      EXPECT(pcclGetInbound(a, 0, NULL) == pcclInvalidArgument);
    }
  }
  {
    pcclMasterStats_t ms = PCCL_MASTER_STATS_INIT;
    EXPECT(pcclMasterGetStats(master, &ms) == pcclSuccess);
    EXPECT(ms.accepted == 2 && ms.pending == 0 && ms.building == 0 && ms.epoch == 2 && ms.connections == 2);
    EXPECT(ms.collectives == 0);
    /* A struct from the header before `collectives` was appended: filled up to connections. */
    ms.struct_size = (uint32_t)offsetof(pcclMasterStats_t, collectives);
    ms.collectives = 77;
    ms.accepted = 0;
    EXPECT(pcclMasterGetStats(master, &ms) == pcclSuccess);
    EXPECT(ms.accepted == 2 && ms.collectives == 77);
    ms.struct_size = (uint32_t)sizeof(pcclMasterStats_t);
    EXPECT(pcclMasterGetStats(master, NULL) == pcclInvalidArgument);
    ms.struct_size = 4;
    EXPECT(pcclMasterGetStats(master, &ms) == pcclInvalidArgument);
    EXPECT(pcclMasterGetStats((pcclMaster_t)&ms, &ms) == pcclInvalidArgument);
  }
  /* pcclOptimizeTopology: both peers call it; the master measures a -> b and b -> a, installs a ring
     under a new epoch, and the links are visible through pcclGetLinks. */
  {
    size_t count = 0;
    pcclLink_t links[4];
    pcclMasterStats_t ms = PCCL_MASTER_STATS_INIT;
    EXPECT(pcclGetLinks(a, NULL, 0, &count) == pcclSuccess && count == 0); /* nothing measured yet */
    pthread_create(&thread, NULL, optimizeOnB, b);
    EXPECT(pcclOptimizeTopology(a) == pcclSuccess);
    pthread_join(thread, NULL);
    EXPECT(g_optimize_b == pcclSuccess);
    EXPECT(pcclGetAttribute(a, PCCL_ATTR_EPOCH, &v) == pcclSuccess && v == 3);
    EXPECT(pcclGetLinks(a, NULL, 0, &count) == pcclSuccess && count == 2);
    EXPECT(pcclGetLinks(b, links, 4, &count) == pcclSuccess && count == 2);
    EXPECT(links[0].from_rank != links[0].to_rank && links[0].from_rank < 2 && links[0].to_rank < 2);
    EXPECT(links[0].bandwidth > 0 && links[0].rtt_s > 0 && links[1].bandwidth > 0);
    EXPECT(pcclGetLinks(a, links, 1, &count) == pcclSuccess && count == 2); /* capacity 1: one written */
    EXPECT(pcclGetLinks(a, NULL, 1, &count) == pcclInvalidArgument);
    EXPECT(pcclGetLinks(a, links, 4, NULL) == pcclInvalidArgument);
    /* Measured now: b is placed from the links (with a's region when they are near, as on one host),
       and both peers read the same regions. */
    {
      char ra[PCCL_MAX_REGION_LEN + 1], rb[PCCL_MAX_REGION_LEN + 1];
      size_t la = 0, lb = 0;
      uint32_t r;
      for (r = 0; r < 2; ++r) {
        EXPECT(pcclGetRegion(a, r, ra, sizeof ra, &la) == pcclSuccess);
        EXPECT(pcclGetRegion(b, r, rb, sizeof rb, &lb) == pcclSuccess);
        EXPECT(strcmp(ra, rb) == 0 && la == lb && la > 0);
      }
    }
    EXPECT(pcclMasterGetStats(master, &ms) == pcclSuccess);
    EXPECT(ms.topology_surveys == 1 && ms.links_measured == 2 && ms.links_known == 2 && ms.measuring == 0);
    EXPECT(ms.predicted_bottleneck > 0 && ms.epoch == 3);
    /* Before the survey fields were appended: filled up to collectives. */
    ms.struct_size = (uint32_t)offsetof(pcclMasterStats_t, measuring);
    ms.topology_surveys = 77;
    EXPECT(pcclMasterGetStats(master, &ms) == pcclSuccess && ms.topology_surveys == 77);
  }
  EXPECT(pcclGetAttribute(a, (pcclAttribute_t)99, &v) == pcclInvalidArgument);
  EXPECT(pcclGetAttribute(a, PCCL_ATTR_PEER_GROUP, &v) == pcclSuccess && v == 0);
  EXPECT(pcclGetAttribute(a, PCCL_ATTR_LISTEN_PORT, &v) == pcclSuccess && v > 0 && v < 65536);
  EXPECT(pcclGetAttribute(a, PCCL_ATTR_CIPHER, &v) == pcclSuccess && v == 0); /* not encrypted */
  {
    int64_t ga = -1, gb = -1;
    EXPECT(pcclGetAttribute(a, PCCL_ATTR_GROUP_RANK, &ga) == pcclSuccess);
    EXPECT(pcclGetAttribute(b, PCCL_ATTR_GROUP_RANK, &gb) == pcclSuccess);
    EXPECT(ga + gb == 1);
  }

  /* All-reduces through the C API: a's inputs are 2i, b's are i. */
  {
    float x[1001], out[1001];
    double y[3] = {-1.0, 0.0, 2.0};
    pcclReduceOptions_t opts = PCCL_REDUCE_OPTIONS_INIT;
    pcclRequest_t req = NULL;
    int i;
    for (i = 0; i < 1001; ++i) x[i] = (float)(2 * i);
    pthread_create(&thread, NULL, reduceOnB, b);
    opts.tag = 5;
    EXPECT(pcclAllReduce(x, out, 1001, pcclFloat32, pcclSum, &opts, a, NULL) == pcclSuccess);
    for (i = 0; i < 1001; ++i) EXPECT(out[i] == (float)(3 * i) && x[i] == (float)(2 * i));
    opts.tag = 6;
    EXPECT(pcclAllReduceAsync(y, y, 3, pcclFloat64, pcclMax, &opts, a, &req) == pcclSuccess);
    EXPECT(pcclWait(req, NULL) == pcclSuccess);
    pthread_join(thread, NULL);
    EXPECT(y[0] == 1.5 && y[1] == 0.0 && y[2] == 4.0);
    /* Bad arguments are refused with a message, nothing is sent. */
    EXPECT(pcclAllReduce(NULL, out, 4, pcclFloat32, pcclSum, NULL, a, NULL) == pcclInvalidArgument);
    EXPECT(pcclAllReduce(x, out, 4, (pcclDataType_t)77, pcclSum, NULL, a, NULL) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(a), "pcclDataType_t") != NULL);
    EXPECT(pcclAllReduce(x, out, 4, pcclFloat32, (pcclRedOp_t)9, NULL, a, NULL) == pcclInvalidArgument);
    opts.quant = pcclQuantInt8; /* integers are never quantized */
    EXPECT(pcclAllReduce(x, out, 4, pcclInt32, pcclSum, &opts, a, NULL) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(a), "int8") != NULL);
    opts.quant = pcclQuantFp4;
    EXPECT(pcclAllReduce(x, out, 4, pcclInt32, pcclSum, &opts, a, NULL) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(a), "fp4") != NULL);
    opts.quant = (pcclQuant_t)5; /* past the last format */
    EXPECT(pcclAllReduce(x, out, 4, pcclFloat32, pcclSum, &opts, a, NULL) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(a), "pcclQuant_t") != NULL);
    opts.quant = pcclQuantNone;
    opts.compress = 20; /* zstd levels are 1..19 */
    EXPECT(pcclAllReduce(x, out, 4, pcclFloat32, pcclSum, &opts, a, NULL) == pcclInvalidArgument);
    opts.compress = 0;
    opts.struct_size = 1;
    EXPECT(pcclAllReduce(x, out, 4, pcclFloat32, pcclSum, &opts, a, NULL) == pcclInvalidArgument);
    EXPECT(pcclAllReduceAsync(x, out, 4, pcclFloat32, pcclSum, NULL, a, NULL) == pcclInvalidArgument);
    EXPECT(pcclWait(NULL, NULL) == pcclInvalidArgument);
    EXPECT(pcclTest((pcclRequest_t)&opts, &i) == pcclInvalidArgument);
  }
  /* Counters after two all-reduces on each peer; refused calls count as nothing. */
  {
    pcclCommStats_t s = PCCL_COMM_STATS_INIT;
    EXPECT(pcclGetStats(a, &s) == pcclSuccess);
    EXPECT(s.allreduce_ops == 2 && s.allreduce_aborts == 0 && s.allreduce_retries == 0);
    EXPECT(s.topology_updates == 3 && s.epoch == 3 && s.tx_bytes > 0 && s.rx_bytes > 0);
    EXPECT(s.last_allreduce_time_s > 0 && s.last_allreduce_bytes_per_s > 0);
    /* A struct from the header before same_host_read_bytes was appended is filled up to the field before it. */
    s.struct_size = (uint32_t)offsetof(pcclCommStats_t, same_host_read_bytes);
    s.same_host_read_bytes = 12345;
    s.allreduce_ops = 0;
    EXPECT(pcclGetStats(a, &s) == pcclSuccess);
    EXPECT(s.allreduce_ops == 2 && s.same_host_read_bytes == 12345);
    /* ... and one from before the master counters, filled up to same_host_read_bytes. */
    s = (pcclCommStats_t)PCCL_COMM_STATS_INIT;
    EXPECT(pcclGetStats(a, &s) == pcclSuccess && s.master_losses == 0 && s.master_returns == 0);
    s.struct_size = (uint32_t)offsetof(pcclCommStats_t, master_losses);
    s.master_losses = 77;
    EXPECT(pcclGetStats(a, &s) == pcclSuccess && s.master_losses == 77 && s.allreduce_ops == 2);
  }

  /* The other collectives through the C API, both peers at once. */
  pthread_create(&thread, NULL, collectivesOn, b);
  collectivesOn(a);
  pthread_join(thread, NULL);

  /* Shared state through the C API: b fetches what differs from a. */
  {
    float w[5000];
    int64_t step = 42;
    pcclTensorInfo_t t[2];
    pcclSharedState_t st = twoTensors(t, w, 5000, &step);
    pcclSyncInfo_t info;
    int i, same = 1;
    for (i = 0; i < 5000; ++i) w[i] = (float)i * 0.5f;
    st.revision = 3;
    pthread_create(&thread, NULL, syncOnB, b);
    EXPECT(pcclSyncSharedState(a, &st, pcclSyncEnforcePopular, &info) == pcclSuccess);
    pthread_join(thread, NULL);
    EXPECT(g_sync_b == pcclSuccess);
    for (i = 0; i < 5000; ++i) same = same && g_weights_b[i] == w[i];
    EXPECT(same && g_step_b == 42);
    EXPECT(info.rx_bytes == 0 && info.tx_bytes > 0 && info.revision == 3 && st.revision == 3);
    EXPECT(g_info_b.keys_received == 2 && g_info_b.rx_bytes > 0 && g_info_b.rx_bytes == info.tx_bytes);
    /* Bad arguments. */
    EXPECT(pcclSyncSharedState(a, NULL, pcclSyncEnforcePopular, NULL) == pcclInvalidArgument);
    EXPECT(pcclSyncSharedState(a, &st, (pcclSyncStrategy_t)5, NULL) == pcclInvalidArgument);
    t[1].name = NULL;
    EXPECT(pcclSyncSharedState(a, &st, pcclSyncSendOnly, NULL) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(NULL), "name") != NULL);
    t[1].name = "weights"; /* twice */
    EXPECT(pcclSyncSharedState(a, &st, pcclSyncSendOnly, NULL) == pcclInvalidArgument);
    EXPECT(strstr(pcclGetLastError(a), "twice") != NULL);
    st.struct_size = 2;
    EXPECT(pcclSyncSharedState(a, &st, pcclSyncSendOnly, NULL) == pcclInvalidArgument);
  }

  /* An operation that b never joins is aborted when b leaves; after the update a retries it alone:
   * the abort/retry loop, as the counters see it. */
  {
    float z[4] = {1, 2, 3, 4};
    pcclReduceOptions_t opts = PCCL_REDUCE_OPTIONS_INIT;
    pcclRequest_t req = NULL;
    pcclCommStats_t s = PCCL_COMM_STATS_INIT;
    pcclResult_t r;
    opts.tag = 9;
    EXPECT(pcclAllReduceAsync(z, z, 4, pcclFloat32, pcclSum, &opts, a, &req) == pcclSuccess);
    /* b never joins tag 9: a wait with a time limit gives up, and the request stays valid. */
    EXPECT(pcclWaitFor(&req, 0, NULL) == pcclTimeout && req != NULL);
    EXPECT(pcclWaitFor(&req, 10, NULL) == pcclTimeout && req != NULL);
    EXPECT(strstr(pcclGetLastError(a), "tag 9 has not ended") != NULL);
    EXPECT(pcclWaitFor(NULL, 10, NULL) == pcclInvalidArgument);
    EXPECT(pcclCommDestroy(b) == pcclSuccess);
    EXPECT(pcclCommDestroy(b) == pcclInvalidArgument); /* stale handle: an error, not a crash */
    r = pcclWaitFor(&req, 60000, NULL); /* now it ends: freed, *req = NULL */
    EXPECT(r == pcclPeerLost && req == NULL);
    EXPECT(strlen(pcclGetLastError(a)) > 0);
    EXPECT(z[0] == 1 && z[3] == 4); /* the input is intact */
    EXPECT(pcclUpdateTopology(a) == pcclSuccess); /* ring of one after b left */
    EXPECT(pcclGetAttribute(a, PCCL_ATTR_WORLD_SIZE, &v) == pcclSuccess && v == 1);
    EXPECT(pcclAllReduce(z, z, 4, pcclFloat32, pcclSum, &opts, a, NULL) == pcclSuccess);
    EXPECT(z[0] == 1 && z[3] == 4);
    EXPECT(pcclGetStats(a, &s) == pcclSuccess);
    EXPECT(s.allreduce_ops == 8 && s.allreduce_aborts == 1 && s.allreduce_retries == 1); /* 3 + 5 other collectives */
    if (!(s.sync_ops == 1 && s.sync_aborts == 0 && s.topology_updates == 4 && s.epoch == 4))
      fprintf(stderr, "sync %lu/%lu updates %lu epoch %lu\n", (unsigned long)s.sync_ops, (unsigned long)s.sync_aborts,
              (unsigned long)s.topology_updates, (unsigned long)s.epoch);
    EXPECT(s.sync_ops == 1 && s.sync_aborts == 0 && s.topology_updates == 4 && s.epoch == 4);
  }
  EXPECT(pcclCommDestroy(a) == pcclSuccess);
  EXPECT(pcclCommDestroy(NULL) == pcclSuccess);
  EXPECT(pcclMasterStop(master) == pcclSuccess);
  {
    uint16_t after = 0;
    EXPECT(pcclMasterGetPort(master, &after) == pcclSuccess && after == port);
  }
  EXPECT(pcclMasterStop(master) == pcclSuccess); /* idempotent */
  EXPECT(pcclMasterDestroy(master) == pcclSuccess);
  EXPECT(pcclMasterDestroy(master) == pcclInvalidArgument);

  if (g_failures == 0) printf("c_api_test: all checks passed\n");
  return g_failures == 0 ? 0 : 1;
}
