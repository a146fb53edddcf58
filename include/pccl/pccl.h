/*
 * pccl — fault-tolerant collective communication over wide-area networks. The C API.
 *
 * C99, no C++ types. Every function returns pcclResult_t unless noted, checks its pointers and
 * handles, and never aborts the process. After a failure, pcclGetLastError(comm) says why.
 * Full reference: docs/c_api.md. Concurrency rules: docs/concurrency.md.
 */
#ifndef PCCL_PCCL_H_
#define PCCL_PCCL_H_

#include <stddef.h>
#include <stdint.h>

#include "pccl/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PCCL_VERSION_MAJOR 0
#define PCCL_VERSION_MINOR 1
#define PCCL_VERSION_PATCH 0
/* Version of the config structs' layout; bumped when fields are appended. */
#define PCCL_CONFIG_VERSION 1

typedef enum {
  pcclSuccess = 0,
  pcclInvalidArgument,   /* a NULL pointer, bad handle, or out-of-range value */
  pcclInvalidUsage,      /* a call not allowed in the current state (e.g. update before connect) */
  pcclMasterUnreachable, /* the master cannot be reached, or stopped answering heartbeats */
  pcclAuthFailed,        /* shared-secret authentication failed (wrong or missing secret) */
  pcclVersionMismatch,   /* the remote speaks another protocol version */
  pcclPeerLost,          /* a peer died or left during the operation; call pcclUpdateTopology, retry */
  pcclTooFewPeers,
  pcclTimeout,           /* the call's deadline passed */
  pcclMismatch,          /* peers disagree about a collective */
  pcclKicked,            /* the master removed this peer (e.g. missed heartbeats while frozen) */
  pcclUnsupported,       /* not available in this build */
  pcclSystemError,       /* an operating-system or network error */
  pcclInternalError,     /* a bug in pccl: please report it */
  pcclProtocolError      /* the remote sent malformed or unexpected data */
} pcclResult_t;

typedef enum {
  pcclInt8, pcclUint8, pcclInt16, pcclUint16, pcclInt32, pcclUint32, pcclInt64, pcclUint64,
  pcclFloat16, pcclBfloat16, pcclFloat32, pcclFloat64
} pcclDataType_t;
typedef enum { pcclSum, pcclAvg, pcclProd, pcclMin, pcclMax } pcclRedOp_t;
typedef enum { pcclQuantNone, pcclQuantFp16, pcclQuantBf16, pcclQuantInt8 } pcclQuant_t;

typedef enum { pcclBufferHost = 0, pcclBufferDevice = 1 } pcclBufferLocation_t;

typedef struct pcclComm* pcclComm_t;
typedef struct pcclMaster* pcclMaster_t;
typedef struct pcclRequest* pcclRequest_t;

typedef enum {
  PCCL_ATTR_WORLD_SIZE = 0,       /* accepted peers in the run (all groups) */
  PCCL_ATTR_RANK = 1,             /* this peer's index in the global ring */
  PCCL_ATTR_GROUP_WORLD_SIZE = 2, /* accepted peers in this peer's group */
  PCCL_ATTR_GROUP_RANK = 3,       /* this peer's index within its group's ring */
  PCCL_ATTR_EPOCH = 4,            /* topology epoch of the current ring (0 before the first) */
  PCCL_ATTR_PEER_GROUP = 5,       /* the group id this peer declared */
  PCCL_ATTR_LISTEN_PORT = 6,      /* the port ring neighbours connect to */
  PCCL_ATTR_RING_CONNECTIONS = 7, /* TCP connections to the ring successor (0 when alone in the group) */
  PCCL_ATTR_CIPHER = 8            /* 0: plain run; 1: ChaCha20-Poly1305, 2: AES-256-GCM offered (a connection
                                     uses AES-256-GCM only when both of its ends offer it) */
} pcclAttribute_t;

/* Peer configuration. Initialise with PCCL_COMM_CONFIG_INIT, then set fields. */
typedef struct {
  uint32_t struct_size;            /* sizeof(pcclCommConfig_t), set by the initializer */
  uint32_t config_version;         /* PCCL_CONFIG_VERSION, set by the initializer */
  const char* master_address;      /* "HOST:PORT" of the master; required */
  const char* listen_address;      /* where ring neighbours connect; NULL = "0.0.0.0:0" */
  const char* advertise_host;      /* host others dial; NULL = the address the master sees */
  uint32_t peer_group;             /* collectives run within a group; default 0 */
  uint32_t connections_per_peer;   /* K TCP connections to the ring successor; default 4 */
  uint32_t heartbeat_interval_ms;  /* default 1000 */
  uint32_t peer_timeout_ms;        /* master silence before pcclMasterUnreachable; default 10000 */
  uint32_t connect_timeout_ms;     /* deadline of pcclConnect / pcclUpdateTopology; default 120000 */
  uint32_t handshake_timeout_ms;   /* deadline of one connection's authentication; default 5000 */
  const void* secret;              /* shared secret; NULL = PCCL_SECRET / PCCL_SECRET_FILE, else open */
  size_t secret_len;
  int encrypt;                     /* 1: encrypt every connection (needs a secret; the master and every
                                      peer must agree); 0 = PCCL_ENCRYPT, else off */
  uint32_t op_timeout_ms;          /* deadline of one collective, call to result; default 1800000 */
  uint32_t segment_bytes;          /* largest pipelining unit on the ring; all peers must agree;
                                      64 .. 64 MiB, default 1 MiB */
  uint32_t same_host_connections;  /* K when the successor is on this host (same advertised host, or both
                                      loopback); 0 = connections_per_peer; default 1 */
  uint32_t max_concurrent_ops;     /* all-reduces in flight on this peer at once (1..65536); default 1024 */
} pcclCommConfig_t;

#define PCCL_COMM_CONFIG_INIT                                                                 \
  {                                                                                           \
    (uint32_t) sizeof(pcclCommConfig_t), PCCL_CONFIG_VERSION, NULL, NULL, NULL, 0u, 4u, 1000u, \
        10000u, 120000u, 5000u, NULL, 0u, 0, 1800000u, 1048576u, 1u, 1024u                    \
  }

/* Per-operation options. Initialise with PCCL_REDUCE_OPTIONS_INIT. */
typedef struct {
  uint32_t struct_size;
  uint64_t tag;                    /* operations in flight at once need distinct tags; default 0 */
  pcclQuant_t quant;               /* wire format: none, fp16/bf16 (float32/float64 data), int8 (any
                                      floating type); sum, avg, min, max; default pcclQuantNone */
  int compress;                    /* zstd level 1..19 on the wire bytes (after quantization); 0 = off */
  pcclBufferLocation_t location;   /* pcclBufferDevice: both buffers are memory of one GPU; needs a GPU
                                      backend module (docs/gpu.md), else pcclUnsupported */
} pcclReduceOptions_t;

#define PCCL_REDUCE_OPTIONS_INIT \
  { (uint32_t) sizeof(pcclReduceOptions_t), 0u, pcclQuantNone, 0, pcclBufferHost }

/* What one all-reduce did. */
typedef struct {
  uint64_t tx_bytes;    /* payload bytes this peer sent on the ring */
  uint64_t rx_bytes;    /* payload bytes it received */
  uint32_t world_size;  /* peers that took part (this peer's group) */
  double time_s;        /* wall time from the call to the result */
} pcclReduceInfo_t;

/* One named buffer of the shared state (host memory). */
typedef struct {
  const char* name;        /* unique within the state; 1..256 bytes */
  pcclDataType_t dtype;
  size_t count;            /* elements */
  void* data;              /* count elements; overwritten when this peer is out of date */
} pcclTensorInfo_t;

/* Shared state: named buffers plus a revision (docs/shared_state.md). Initialise with
 * PCCL_SHARED_STATE_INIT, then set fields. */
typedef struct {
  uint32_t struct_size;
  uint64_t revision;       /* in: this peer's; out (on success): the elected revision */
  size_t count;            /* entries in infos (at most 16384) */
  pcclTensorInfo_t* infos;
  int compress;            /* zstd level 1..19 asked of the sources for what this peer fetches; 0 = off */
} pcclSharedState_t;

#define PCCL_SHARED_STATE_INIT { (uint32_t) sizeof(pcclSharedState_t), 0u, 0u, NULL, 0 }

typedef enum {
  pcclSyncEnforcePopular = 0, /* offer this peer's content; take the elected one */
  pcclSyncReceiveOnly = 1,    /* never a candidate; take the elected content */
  pcclSyncSendOnly = 2        /* offer this peer's content; never take any (buffers stay as they are) */
} pcclSyncStrategy_t;

/* What one shared-state sync did. */
typedef struct {
  uint64_t tx_bytes;        /* bytes this peer sent to others (on the wire, after zstd) */
  uint64_t rx_bytes;        /* bytes it received; 0 when it was up to date */
  uint32_t keys_received;   /* tensors whose content it replaced */
  uint64_t revision;        /* the elected revision */
  double time_s;            /* wall time from the call to the result */
} pcclSyncInfo_t;

/* Master configuration. Initialise with PCCL_MASTER_CONFIG_INIT, then set fields. */
typedef struct {
  uint32_t struct_size;
  uint32_t config_version;
  const char* listen_address;      /* "HOST:PORT"; NULL = "0.0.0.0:0" (any port) */
  const void* secret;              /* NULL = open run (the master logs a warning) */
  size_t secret_len;
  uint32_t heartbeat_interval_ms;  /* default 1000 */
  uint32_t peer_timeout_ms;        /* silence before a peer is removed; default 10000 */
  uint32_t handshake_timeout_ms;   /* default 5000 */
  uint32_t max_peers;              /* default 1024 */
  uint32_t max_pending_handshakes; /* connections still authenticating at once; more are closed; default 64 */
  uint32_t max_concurrent_ops;     /* collectives announced or running at once in the run; default 4096 */
  int encrypt;                     /* 1: every connection encrypted (needs a secret); default 0 */
} pcclMasterConfig_t;

#define PCCL_MASTER_CONFIG_INIT                                                                    \
  {                                                                                                \
    (uint32_t) sizeof(pcclMasterConfig_t), PCCL_CONFIG_VERSION, NULL, NULL, 0u, 1000u, 10000u, 5000u, \
        1024u, 64u, 4096u, 0                                                                       \
  }

/* ---- peers ---------------------------------------------------------------------------------- */

/* Creates a communicator and opens its ring listener. Does not contact the master. */
PCCL_API pcclResult_t pcclCommCreate(const pcclCommConfig_t* config, pcclComm_t* comm);
/* Joins the run. Blocks until admitted and the ring is built, or connect_timeout_ms passes. */
PCCL_API pcclResult_t pcclConnect(pcclComm_t comm);
/* Collective vote of all accepted peers: admits pending peers, drops departed ones, builds a new
 * ring with a new epoch. Blocks until done, failed, or connect_timeout_ms passes. */
PCCL_API pcclResult_t pcclUpdateTopology(pcclComm_t comm);
/* *pending = 1 when pcclUpdateTopology would change something (pending joiners, an open vote, or a
 * departed peer); cheap: no network round trip. */
PCCL_API pcclResult_t pcclArePeersPending(pcclComm_t comm, int* pending);
PCCL_API pcclResult_t pcclGetAttribute(pcclComm_t comm, pcclAttribute_t attr, int64_t* value);

/* ---- collectives ---------------------------------------------------------------------------- */

/* Reduces `count` elements of `sendbuf` across every peer of this peer's group into `recvbuf`
 * (sendbuf == recvbuf: in place; otherwise they must not overlap). Every peer of the group calls it
 * with the same tag, count, dtype, op and quantization; any difference returns pcclMismatch on every
 * peer. Blocks until done. Every peer gets bit-identical results. On failure sendbuf is untouched and
 * an in-place recvbuf holds its input again; pcclPeerLost means: call pcclUpdateTopology, then retry.
 * opts and info may be NULL. */
PCCL_API pcclResult_t pcclAllReduce(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype,
                                    pcclRedOp_t op, const pcclReduceOptions_t* opts, pcclComm_t comm,
                                    pcclReduceInfo_t* info);
/* Starts the same operation and returns at once; the buffers belong to pccl until pcclWait returns.
 * Operations in flight together need distinct tags (a tag still in flight: pcclInvalidUsage). */
PCCL_API pcclResult_t pcclAllReduceAsync(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype,
                                         pcclRedOp_t op, const pcclReduceOptions_t* opts, pcclComm_t comm,
                                         pcclRequest_t* req);
/* Blocks until the operation ends; returns its result and frees req. info may be NULL. */
PCCL_API pcclResult_t pcclWait(pcclRequest_t req, pcclReduceInfo_t* info);
/* *done = 1 when the operation has ended (pcclWait then returns at once), else 0. Never blocks. */
PCCL_API pcclResult_t pcclTest(pcclRequest_t req, int* done);
/* Makes this peer's shared state equal to the group's (docs/shared_state.md). Every peer of the
 * group calls it. The master elects, per tensor, the content most peers hold at the highest revision
 * among those offering content; out-of-date peers fetch only the tensors that differ, striped across
 * the peers holding them, and verify their BLAKE2b digests; an up-to-date peer receives nothing.
 * Blocks until the whole group is done, or op_timeout_ms. A peer whose tensor names, dtypes or counts
 * differ from the elected set gets pcclInvalidArgument (the others go on). Not while a collective is in
 * flight on this peer. On failure state->revision is unchanged and fetched tensors may hold partial
 * content: call again (after pcclUpdateTopology on pcclPeerLost). info may be NULL. */
PCCL_API pcclResult_t pcclSyncSharedState(pcclComm_t comm, pcclSharedState_t* state, pcclSyncStrategy_t strategy,
                                          pcclSyncInfo_t* info);
/* Leaves gracefully (if joined) and frees the communicator. NULL is accepted. */
PCCL_API pcclResult_t pcclCommDestroy(pcclComm_t comm);

/* ---- errors --------------------------------------------------------------------------------- */

/* Static string naming the code; never NULL. */
PCCL_API const char* pcclGetErrorString(pcclResult_t result);
/* Detail of the last failure on this communicator ("" if none). With comm == NULL, the detail of the
 * last failure on this thread that had no communicator (e.g. pcclCommCreate). Valid until the next
 * pccl call on the same thread. Never NULL. */
PCCL_API const char* pcclGetLastError(pcclComm_t comm);

/* ---- embeddable master ---------------------------------------------------------------------- */

PCCL_API pcclResult_t pcclMasterCreate(const pcclMasterConfig_t* config, pcclMaster_t* master);
/* Binds and serves in a background thread; returns at once. */
PCCL_API pcclResult_t pcclMasterStart(pcclMaster_t master);
PCCL_API pcclResult_t pcclMasterGetPort(pcclMaster_t master, uint16_t* port);
/* Blocks until at least `accepted` peers are in the ring and at least `pending` wait for admission,
 * or returns pcclTimeout after timeout_ms. Lets a launcher wait for its workers without polling. */
PCCL_API pcclResult_t pcclMasterWaitForPeers(pcclMaster_t master, uint32_t accepted, uint32_t pending,
                                             uint32_t timeout_ms);
PCCL_API pcclResult_t pcclMasterStop(pcclMaster_t master);
/* Stops (if running) and frees. NULL is accepted. */
PCCL_API pcclResult_t pcclMasterDestroy(pcclMaster_t master);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_PCCL_H_ */
