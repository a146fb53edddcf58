// The C API: validate every pointer and handle, call the C++ API, map codes 1:1, catch everything.
#include "pccl/pccl.h"

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>

#include "pccl/communicator.hpp"
#include "pccl/master.hpp"

struct pcclComm {
  std::unique_ptr<pccl::Communicator> impl;
  uint32_t peer_group = 0;
  std::mutex error_mu;
  std::string last_error;  // detail of the last failed call on this communicator, from any thread
};

struct pcclMaster {
  std::unique_ptr<pccl::Master> impl;
};

struct pcclRequest {
  pccl::ReduceHandle handle;
  pcclComm* comm = nullptr;  // where pcclWait records a failure (if the communicator still exists)
};

namespace {

// Handles are checked against the set of live ones, so a stale or garbage handle is an error, not a crash.
template <typename H>
class Registry {
 public:
  void add(H* h) {
    std::lock_guard<std::mutex> lk(mu_);
    live_.insert(h);
  }
  bool remove(H* h) {
    std::lock_guard<std::mutex> lk(mu_);
    return live_.erase(h) != 0;
  }
  bool contains(H* h) {
    std::lock_guard<std::mutex> lk(mu_);
    return live_.count(h) != 0;
  }
  // Runs fn(h) if h is live, holding the registry lock so a concurrent remove() cannot free it meanwhile.
  template <typename Fn>
  bool visit(H* h, Fn&& fn) {
    std::lock_guard<std::mutex> lk(mu_);
    if (live_.count(h) == 0) return false;
    fn(h);
    return true;
  }

 private:
  std::mutex mu_;
  std::unordered_set<H*> live_;
};

Registry<pcclComm>& comms() {
  static Registry<pcclComm> r;
  return r;
}
Registry<pcclMaster>& masters() {
  static Registry<pcclMaster> r;
  return r;
}
Registry<pcclRequest>& requests() {
  static Registry<pcclRequest> r;
  return r;
}

thread_local std::string t_last_error;  // failures with no communicator
thread_local std::string t_returned;    // backing store of pcclGetLastError's result

pcclResult_t toC(pccl::Code c) { return static_cast<pcclResult_t>(static_cast<int>(c)); }

pcclResult_t fail(pcclResult_t code, std::string message) {
  t_last_error = std::move(message);
  return code;
}

pcclResult_t fromStatus(const pccl::Status& s) {
  if (s.isOk()) return pcclSuccess;
  return fail(toC(s.code()), s.message());
}

// Copies the caller's secret straight into `out` (no temporary that would be freed unwiped).
void copySecret(const void* secret, size_t len, std::string* out) {
  if (secret != nullptr) out->assign(static_cast<const char*>(secret), len);
}

// Overwrites what a config's secret string still holds once create() has taken it: a short secret's
// bytes stay in a moved-from string's in-object buffer. (The library wipes the copy it keeps.)
struct WipeSecretOnExit {
  std::string& s;
  ~WipeSecretOnExit() {
    s.resize(s.capacity());
    volatile char* p = s.data();
    for (size_t i = 0; i < s.size(); ++i) p[i] = 0;
    s.clear();
  }
};

// Runs `fn`, turning any escaped exception into an error code: nothing crosses the C boundary.
template <typename Fn>
pcclResult_t guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return fail(pcclSystemError, "out of memory");
  } catch (const std::exception& e) {
    return fail(pcclInternalError, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return fail(pcclInternalError, "unexpected exception");
  }
}

// Runs a call on `comm` like guarded(), and remembers the detail of a failure on the communicator too,
// so pcclGetLastError(comm) reports it from any thread.
template <typename Fn>
pcclResult_t onComm(pcclComm* comm, Fn&& fn) {
  const pcclResult_t r = guarded(std::forward<Fn>(fn));
  if (r != pcclSuccess && comm != nullptr && comms().contains(comm)) {
    std::lock_guard<std::mutex> lk(comm->error_mu);
    comm->last_error = t_last_error;
  }
  return r;
}

#define PCCL_CHECK_COMM(comm)                                                                              \
  if ((comm) == nullptr || !comms().contains(comm)) return fail(pcclInvalidArgument, "invalid communicator handle")
#define PCCL_CHECK_MASTER(master)                                                                          \
  if ((master) == nullptr || !masters().contains(master)) return fail(pcclInvalidArgument, "invalid master handle")
#define PCCL_CHECK_PTR(p) \
  if ((p) == nullptr) return fail(pcclInvalidArgument, #p " must not be NULL")

// A C caller may pass any int as an enum. Reading such a value through the C++ enum type is undefined
// (UBSan: "load of value N, which is not a valid value"), so enums from C are read as their bytes.
template <typename E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}
template <typename E>
bool validEnum(const E& e, int count) {
  const int v = rawEnum(e);
  return v >= 0 && v < count;
}

// Converts the C options (NULL = defaults), checking enum ranges.
pcclResult_t reduceOptionsFrom(const pcclReduceOptions_t* opts, pccl::ReduceOptions* out) {
  if (opts == nullptr) return pcclSuccess;
  if (opts->struct_size != sizeof(pcclReduceOptions_t)) {
    return fail(pcclInvalidArgument, "pcclReduceOptions_t was not initialised with PCCL_REDUCE_OPTIONS_INIT");
  }
  if (!validEnum(opts->quant, 4)) return fail(pcclInvalidArgument, "unknown pcclQuant_t value");
  if (!validEnum(opts->location, 2)) {
    return fail(pcclInvalidArgument, "unknown pcclBufferLocation_t value");
  }
  out->tag = opts->tag;
  out->quant = static_cast<pccl::Quant>(opts->quant);
  out->compress = opts->compress;
  out->location = static_cast<pccl::BufferLocation>(opts->location);
  return pcclSuccess;
}

void infoTo(const pccl::ReduceInfo& in, pcclReduceInfo_t* out) {
  if (out == nullptr) return;
  out->tx_bytes = in.tx_bytes;
  out->rx_bytes = in.rx_bytes;
  out->world_size = in.world_size;
  out->time_s = in.seconds;
}

pcclResult_t checkConfigHeader(uint32_t struct_size, size_t expected, uint32_t version, const char* what) {
  if (struct_size != expected || version != PCCL_CONFIG_VERSION) {
    return fail(pcclInvalidArgument, std::string(what) +
                                         " was not initialised with its _INIT macro (or comes from another pccl "
                                         "version): struct_size " +
                                         std::to_string(struct_size) + ", config_version " + std::to_string(version));
  }
  return pcclSuccess;
}

}  // namespace

extern "C" {

const char* pcclGetErrorString(pcclResult_t result) {
  switch (result) {
    case pcclSuccess: return "success";
    case pcclInvalidArgument: return "invalid argument";
    case pcclInvalidUsage: return "invalid usage";
    case pcclMasterUnreachable: return "master unreachable";
    case pcclAuthFailed: return "authentication failed";
    case pcclVersionMismatch: return "protocol version mismatch";
    case pcclPeerLost: return "peer lost";
    case pcclTooFewPeers: return "too few peers";
    case pcclTimeout: return "timeout";
    case pcclMismatch: return "collective mismatch between peers";
    case pcclKicked: return "kicked by the master";
    case pcclUnsupported: return "unsupported";
    case pcclSystemError: return "system error";
    case pcclInternalError: return "internal error";
    case pcclProtocolError: return "protocol error";
  }
  return "unknown pcclResult_t value";
}

pcclResult_t pcclGetVersion(int* version) {
  PCCL_CHECK_PTR(version);
  *version = PCCL_VERSION_CODE;
  return pcclSuccess;
}

const char* pcclGetLastError(pcclComm_t comm) {
  try {
    if (comm != nullptr && comms().contains(comm)) {
      std::lock_guard<std::mutex> lk(comm->error_mu);
      t_returned = comm->last_error;
    } else {
      t_returned = t_last_error;
    }
  } catch (...) {
    return "";
  }
  return t_returned.c_str();
}

pcclResult_t pcclCommCreate(const pcclCommConfig_t* config, pcclComm_t* comm) {
  return guarded([&]() -> pcclResult_t {
    PCCL_CHECK_PTR(config);
    PCCL_CHECK_PTR(comm);
    *comm = nullptr;
    pcclResult_t r = checkConfigHeader(config->struct_size, sizeof(pcclCommConfig_t), config->config_version,
                                       "pcclCommConfig_t");
    if (r != pcclSuccess) return r;
    if (config->master_address == nullptr) return fail(pcclInvalidArgument, "master_address must be set (HOST:PORT)");
    if (config->secret == nullptr && config->secret_len != 0) {
      return fail(pcclInvalidArgument, "secret is NULL but secret_len is not 0");
    }
    pccl::CommConfig c;
    c.master_address = config->master_address;
    if (config->listen_address != nullptr) c.listen_address = config->listen_address;
    if (config->advertise_host != nullptr) c.advertise_host = config->advertise_host;
    c.peer_group = config->peer_group;
    c.connections_per_peer = config->connections_per_peer;
    c.heartbeat_interval_ms = config->heartbeat_interval_ms;
    c.peer_timeout_ms = config->peer_timeout_ms;
    c.connect_timeout_ms = config->connect_timeout_ms;
    c.handshake_timeout_ms = config->handshake_timeout_ms;
    copySecret(config->secret, config->secret_len, &c.secret);
    WipeSecretOnExit wipe{c.secret};
    c.encrypt = config->encrypt != 0;
    c.op_timeout_ms = config->op_timeout_ms;
    c.segment_bytes = config->segment_bytes;
    c.same_host_connections = config->same_host_connections;
    c.max_concurrent_ops = config->max_concurrent_ops;
    auto created = pccl::Communicator::create(std::move(c));
    if (!created.isOk()) return fromStatus(created.status());
    auto* handle = new pcclComm;
    handle->impl = std::move(created).value();
    handle->peer_group = config->peer_group;
    comms().add(handle);
    *comm = handle;
    return pcclSuccess;
  });
}

pcclResult_t pcclConnect(pcclComm_t comm) {
  return onComm(comm, [&]() -> pcclResult_t {
    PCCL_CHECK_COMM(comm);
    return fromStatus(comm->impl->connect());
  });
}

pcclResult_t pcclUpdateTopology(pcclComm_t comm) {
  return onComm(comm, [&]() -> pcclResult_t {
    PCCL_CHECK_COMM(comm);
    return fromStatus(comm->impl->updateTopology());
  });
}

pcclResult_t pcclArePeersPending(pcclComm_t comm, int* pending) {
  return onComm(comm, [&]() -> pcclResult_t {
    PCCL_CHECK_COMM(comm);
    PCCL_CHECK_PTR(pending);
    auto r = comm->impl->arePeersPending();
    if (!r.isOk()) return fromStatus(r.status());
    *pending = *r ? 1 : 0;
    return pcclSuccess;
  });
}

pcclResult_t pcclGetAttribute(pcclComm_t comm, pcclAttribute_t attr, int64_t* value) {
  return onComm(comm, [&]() -> pcclResult_t {
    PCCL_CHECK_COMM(comm);
    PCCL_CHECK_PTR(value);
    pccl::Topology t = comm->impl->topology();
    const int a = rawEnum(attr);
    switch (a) {
      case PCCL_ATTR_WORLD_SIZE: *value = t.world_size; return pcclSuccess;
      case PCCL_ATTR_RANK: *value = t.rank; return pcclSuccess;
      case PCCL_ATTR_GROUP_WORLD_SIZE: *value = t.group_world_size; return pcclSuccess;
      case PCCL_ATTR_GROUP_RANK: *value = t.group_rank; return pcclSuccess;
      case PCCL_ATTR_EPOCH: *value = static_cast<int64_t>(t.epoch); return pcclSuccess;
      case PCCL_ATTR_PEER_GROUP: *value = comm->peer_group; return pcclSuccess;
      case PCCL_ATTR_LISTEN_PORT: *value = comm->impl->listenPort(); return pcclSuccess;
      case PCCL_ATTR_RING_CONNECTIONS: *value = t.successor_connections; return pcclSuccess;
      case PCCL_ATTR_CIPHER: {
        const std::string c = comm->impl->cipher();
        *value = c == "none" ? 0 : c == "AES-256-GCM" ? 2 : 1;
        return pcclSuccess;
      }
    }
    return fail(pcclInvalidArgument, "unknown attribute " + std::to_string(a));
  });
}

pcclResult_t pcclGetStats(pcclComm_t comm, pcclCommStats_t* stats) {
  return onComm(comm, [&]() -> pcclResult_t {
    PCCL_CHECK_COMM(comm);
    PCCL_CHECK_PTR(stats);
    if (stats->struct_size != sizeof(pcclCommStats_t)) {
      return fail(pcclInvalidArgument, "pcclCommStats_t was not initialised with PCCL_COMM_STATS_INIT (struct_size " +
                                           std::to_string(stats->struct_size) + ")");
    }
    const pccl::CommStats s = comm->impl->stats();
    stats->allreduce_ops = s.allreduce_ops;
    stats->allreduce_aborts = s.allreduce_aborts;
    stats->allreduce_retries = s.allreduce_retries;
    stats->sync_ops = s.sync_ops;
    stats->sync_aborts = s.sync_aborts;
    stats->topology_updates = s.topology_updates;
    stats->tx_bytes = s.tx_bytes;
    stats->rx_bytes = s.rx_bytes;
    stats->epoch = s.epoch;
    stats->last_allreduce_time_s = s.last_allreduce_seconds;
    stats->last_allreduce_bytes_per_s = s.last_allreduce_bytes_per_second;
    return pcclSuccess;
  });
}

pcclResult_t pcclAllReduceAsync(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype,
                                pcclRedOp_t op, const pcclReduceOptions_t* opts, pcclComm_t comm, pcclRequest_t* req) {
  return onComm(comm, [&]() -> pcclResult_t {
    PCCL_CHECK_COMM(comm);
    PCCL_CHECK_PTR(req);
    *req = nullptr;
    if (!validEnum(dtype, 12)) return fail(pcclInvalidArgument, "unknown pcclDataType_t value");
    if (!validEnum(op, 5)) return fail(pcclInvalidArgument, "unknown pcclRedOp_t value");
    pccl::ReduceOptions o;
    pcclResult_t r = reduceOptionsFrom(opts, &o);
    if (r != pcclSuccess) return r;
    auto h = comm->impl->allReduceAsync(sendbuf, recvbuf, count, static_cast<pccl::DataType>(dtype),
                                        static_cast<pccl::RedOp>(op), o);
    if (!h.isOk()) return fromStatus(h.status());
    auto* handle = new pcclRequest{std::move(h).value(), comm};
    requests().add(handle);
    *req = handle;
    return pcclSuccess;
  });
}

pcclResult_t pcclWait(pcclRequest_t req, pcclReduceInfo_t* info) {
  return guarded([&]() -> pcclResult_t {
    if (req == nullptr || !requests().remove(req)) return fail(pcclInvalidArgument, "invalid request handle");
    std::unique_ptr<pcclRequest> owned(req);
    auto r = owned->handle.wait();
    if (!r.isOk()) {
      pcclComm* comm = owned->comm;
      return onComm(comm, [&] { return fromStatus(r.status()); });
    }
    infoTo(*r, info);
    return pcclSuccess;
  });
}

pcclResult_t pcclTest(pcclRequest_t req, int* done) {
  return guarded([&]() -> pcclResult_t {
    PCCL_CHECK_PTR(done);
    // test() only takes the operation's own lock briefly: safe under the registry lock, and a pcclWait
    // on another thread cannot free req in between.
    if (req == nullptr || !requests().visit(req, [&](pcclRequest* r) { *done = r->handle.test() ? 1 : 0; })) {
      return fail(pcclInvalidArgument, "invalid request handle");
    }
    return pcclSuccess;
  });
}

pcclResult_t pcclAllReduce(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                           const pcclReduceOptions_t* opts, pcclComm_t comm, pcclReduceInfo_t* info) {
  pcclRequest_t req = nullptr;
  pcclResult_t r = pcclAllReduceAsync(sendbuf, recvbuf, count, dtype, op, opts, comm, &req);
  if (r != pcclSuccess) return r;
  return pcclWait(req, info);
}

pcclResult_t pcclSyncSharedState(pcclComm_t comm, pcclSharedState_t* state, pcclSyncStrategy_t strategy,
                                 pcclSyncInfo_t* info) {
  return onComm(comm, [&]() -> pcclResult_t {
    PCCL_CHECK_COMM(comm);
    PCCL_CHECK_PTR(state);
    if (state->struct_size != sizeof(pcclSharedState_t)) {
      return fail(pcclInvalidArgument, "pcclSharedState_t was not initialised with PCCL_SHARED_STATE_INIT");
    }
    if (!validEnum(strategy, 3)) return fail(pcclInvalidArgument, "unknown pcclSyncStrategy_t value");
    if (state->count > 0 && state->infos == nullptr) return fail(pcclInvalidArgument, "state->infos must not be NULL");
    pccl::SharedState s;
    s.revision = state->revision;
    s.compress = state->compress;
    for (size_t i = 0; i < state->count; ++i) {
      const pcclTensorInfo_t& t = state->infos[i];
      if (t.name == nullptr) return fail(pcclInvalidArgument, fmt::format("state->infos[{}].name is NULL", i));
      if (!validEnum(t.dtype, 12)) {
        return fail(pcclInvalidArgument, fmt::format("state->infos[{}]: unknown pcclDataType_t value", i));
      }
      s.tensors.push_back(pccl::SharedTensor{t.name, static_cast<pccl::DataType>(t.dtype), t.count, t.data});
    }
    auto r = comm->impl->syncSharedState(s, static_cast<pccl::SyncStrategy>(strategy));
    if (!r.isOk()) return fromStatus(r.status());
    state->revision = s.revision;
    if (info != nullptr) {
      info->tx_bytes = r->tx_bytes;
      info->rx_bytes = r->rx_bytes;
      info->keys_received = r->keys_received;
      info->revision = r->revision;
      info->time_s = r->seconds;
    }
    return pcclSuccess;
  });
}

pcclResult_t pcclCommDestroy(pcclComm_t comm) {
  return guarded([&]() -> pcclResult_t {
    if (comm == nullptr) return pcclSuccess;
    if (!comms().remove(comm)) return fail(pcclInvalidArgument, "invalid communicator handle (already destroyed?)");
    delete comm;
    return pcclSuccess;
  });
}

pcclResult_t pcclMasterCreate(const pcclMasterConfig_t* config, pcclMaster_t* master) {
  return guarded([&]() -> pcclResult_t {
    PCCL_CHECK_PTR(config);
    PCCL_CHECK_PTR(master);
    *master = nullptr;
    pcclResult_t r = checkConfigHeader(config->struct_size, sizeof(pcclMasterConfig_t), config->config_version,
                                       "pcclMasterConfig_t");
    if (r != pcclSuccess) return r;
    if (config->secret == nullptr && config->secret_len != 0) {
      return fail(pcclInvalidArgument, "secret is NULL but secret_len is not 0");
    }
    pccl::MasterConfig c;
    if (config->listen_address != nullptr) c.listen_address = config->listen_address;
    copySecret(config->secret, config->secret_len, &c.secret);
    WipeSecretOnExit wipe{c.secret};
    c.heartbeat_interval_ms = config->heartbeat_interval_ms;
    c.peer_timeout_ms = config->peer_timeout_ms;
    c.handshake_timeout_ms = config->handshake_timeout_ms;
    c.max_peers = config->max_peers;
    c.max_pending_handshakes = config->max_pending_handshakes;
    c.max_concurrent_ops = config->max_concurrent_ops;
    c.encrypt = config->encrypt != 0;
    auto created = pccl::Master::create(std::move(c));
    if (!created.isOk()) return fromStatus(created.status());
    auto* handle = new pcclMaster{std::move(created).value()};
    masters().add(handle);
    *master = handle;
    return pcclSuccess;
  });
}

pcclResult_t pcclMasterStart(pcclMaster_t master) {
  return guarded([&]() -> pcclResult_t {
    PCCL_CHECK_MASTER(master);
    return fromStatus(master->impl->start());
  });
}

pcclResult_t pcclMasterGetPort(pcclMaster_t master, uint16_t* port) {
  return guarded([&]() -> pcclResult_t {
    PCCL_CHECK_MASTER(master);
    PCCL_CHECK_PTR(port);
    *port = master->impl->port();
    if (*port == 0) return fail(pcclInvalidUsage, "master not started");
    return pcclSuccess;
  });
}

pcclResult_t pcclMasterWaitForPeers(pcclMaster_t master, uint32_t accepted, uint32_t pending, uint32_t timeout_ms) {
  return guarded([&]() -> pcclResult_t {
    PCCL_CHECK_MASTER(master);
    bool ok = master->impl->waitFor(
        [&](const pccl::MasterStats& s) { return s.accepted >= accepted && s.pending >= pending; }, timeout_ms);
    if (ok) return pcclSuccess;
    pccl::MasterStats s = master->impl->stats();
    return fail(pcclTimeout, "after " + std::to_string(timeout_ms) + " ms: " + std::to_string(s.accepted) +
                                 " accepted (wanted " + std::to_string(accepted) + "), " + std::to_string(s.pending) +
                                 " pending (wanted " + std::to_string(pending) + ")");
  });
}

pcclResult_t pcclMasterGetStats(pcclMaster_t master, pcclMasterStats_t* stats) {
  return guarded([&]() -> pcclResult_t {
    PCCL_CHECK_MASTER(master);
    PCCL_CHECK_PTR(stats);
    if (stats->struct_size != sizeof(pcclMasterStats_t)) {
      return fail(pcclInvalidArgument, "pcclMasterStats_t was not initialised with PCCL_MASTER_STATS_INIT");
    }
    const pccl::MasterStats s = master->impl->stats();
    stats->accepted = s.accepted;
    stats->pending = s.pending;
    stats->building = s.building ? 1 : 0;
    stats->epoch = s.epoch;
    stats->connections = s.connections;
    return pcclSuccess;
  });
}

pcclResult_t pcclMasterStop(pcclMaster_t master) {
  return guarded([&]() -> pcclResult_t {
    PCCL_CHECK_MASTER(master);
    return fromStatus(master->impl->stop());
  });
}

pcclResult_t pcclMasterDestroy(pcclMaster_t master) {
  return guarded([&]() -> pcclResult_t {
    if (master == nullptr) return pcclSuccess;
    if (!masters().remove(master)) return fail(pcclInvalidArgument, "invalid master handle (already destroyed?)");
    delete master;
    return pcclSuccess;
  });
}

}  // extern "C"
