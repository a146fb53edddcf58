// The embedded master's C API.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "capi/args.hpp"
#include "capi/calls.hpp"

using pccl::capi::fail;
using pccl::capi::fromStatus;
using pccl::capi::MasterEntry;
using pccl::capi::onMaster;

namespace {

pccl::MasterConfig masterConfigFrom(const pcclMasterConfig_t& config) {
  pccl::MasterConfig c;
  if (config.listen_address != nullptr) c.listen_address = config.listen_address;
  pccl::capi::copySecret(config.secret, config.secret_len, &c.secret);
  c.heartbeat_interval_ms = config.heartbeat_interval_ms;
  c.peer_timeout_ms = config.peer_timeout_ms;
  c.announce_window_ms = config.announce_window_ms;
  c.handshake_timeout_ms = config.handshake_timeout_ms;
  c.max_peers = config.max_peers;
  c.max_pending_handshakes = config.max_pending_handshakes;
  c.max_concurrent_ops = config.max_concurrent_ops;
  c.encrypt = config.encrypt != 0;
  if (config.struct_size >= offsetof(pcclMasterConfig_t, standby)) {
    c.probe_budget_ms = config.probe_budget_ms;
    c.probe_bytes = config.probe_bytes;
    c.auto_optimize = config.auto_optimize;
  }
  if (config.struct_size >= sizeof(pcclMasterConfig_t)) {
    c.standby = config.standby != 0;
    c.rebuild_window_ms = config.rebuild_window_ms;
    if (config.state_file != nullptr) c.state_file = config.state_file;
    if (config.etcd_url != nullptr) c.etcd_url = config.etcd_url;
    if (config.etcd_prefix != nullptr) c.etcd_prefix = config.etcd_prefix;
    c.etcd_lease_ms = config.etcd_lease_ms;
    if (config.advertise_address != nullptr) c.advertise_address = config.advertise_address;
  }
  return c;
}

}  // namespace

extern "C" {

pcclResult_t pcclMasterCreate(const pcclMasterConfig_t* config, pcclMaster_t* master) {
  return pccl::capi::guarded([&]() -> pcclResult_t {
    PCCL_CHECK_PTR(config);
    PCCL_CHECK_PTR(master);
    *master = nullptr;
    // A struct from a header older than the probe fields, or than the failover fields, is accepted: they
    // keep their defaults.
    const uint32_t oldest = static_cast<uint32_t>(offsetof(pcclMasterConfig_t, probe_budget_ms));
    const uint32_t older = static_cast<uint32_t>(offsetof(pcclMasterConfig_t, standby));
    const bool known = config->struct_size == oldest || config->struct_size == older;
    pcclResult_t r = pccl::capi::checkConfigHeader(known ? sizeof(pcclMasterConfig_t) : config->struct_size,
                                                   sizeof(pcclMasterConfig_t), config->config_version,
                                                   "pcclMasterConfig_t");
    if (r != pcclSuccess) return r;
    if (config->secret == nullptr && config->secret_len != 0) {
      return fail(pcclInvalidArgument, "secret is NULL but secret_len is not 0");
    }
    const uintptr_t key = pccl::capi::reserveHandle(pccl::capi::HandleKind::kMaster);
    if (key == 0) return fail(pcclSystemError, "no master handles left in this process");
    auto created = pccl::Master::create(masterConfigFrom(*config));
    if (!created.isOk()) return fromStatus(created.status());
    auto entry = std::make_shared<MasterEntry>();
    entry->impl = std::move(created).value();
    pccl::capi::masters().insert(key, std::move(entry));
    *master = pccl::capi::handleOf<pcclMaster>(key);
    return pcclSuccess;
  });
}

pcclResult_t pcclMasterStart(pcclMaster_t master) {
  return onMaster(master, [&](MasterEntry& m) { return fromStatus(m.impl->start()); });
}

pcclResult_t pcclMasterGetPort(pcclMaster_t master, uint16_t* port) {
  return onMaster(master, [&](MasterEntry& m) -> pcclResult_t {
    PCCL_CHECK_PTR(port);
    *port = m.impl->port();
    if (*port == 0) return fail(pcclInvalidUsage, "master not started");
    return pcclSuccess;
  });
}

pcclResult_t pcclMasterWaitForPeers(pcclMaster_t master, uint32_t accepted, uint32_t pending, uint32_t timeout_ms) {
  return onMaster(master, [&](MasterEntry& m) -> pcclResult_t {
    bool ok = m.impl->waitFor(
        [&](const pccl::MasterStats& s) { return s.accepted >= accepted && s.pending >= pending; }, timeout_ms);
    if (ok) return pcclSuccess;
    pccl::MasterStats s = m.impl->stats();
    return fail(pcclTimeout, "after " + std::to_string(timeout_ms) + " ms: " + std::to_string(s.accepted) +
                                 " accepted (wanted " + std::to_string(accepted) + "), " + std::to_string(s.pending) +
                                 " pending (wanted " + std::to_string(pending) + ")");
  });
}

pcclResult_t pcclMasterGetStats(pcclMaster_t master, pcclMasterStats_t* stats) {
  return onMaster(master, [&](MasterEntry& m) -> pcclResult_t {
    PCCL_CHECK_PTR(stats);
    const size_t before_collectives = offsetof(pcclMasterStats_t, collectives);
    const size_t before_probes = offsetof(pcclMasterStats_t, measuring);
    const size_t before_roles = offsetof(pcclMasterStats_t, role);
    const size_t before_reach = offsetof(pcclMasterStats_t, unreachable);
    if (stats->struct_size != sizeof(pcclMasterStats_t) && stats->struct_size != before_collectives &&
        stats->struct_size != before_probes && stats->struct_size != before_roles &&
        stats->struct_size != before_reach) {
      return fail(pcclInvalidArgument, "pcclMasterStats_t was not initialised with PCCL_MASTER_STATS_INIT");
    }
    const pccl::MasterStats s = m.impl->stats();
    stats->accepted = s.accepted;
    stats->pending = s.pending;
    stats->building = s.building ? 1 : 0;
    stats->epoch = s.epoch;
    stats->connections = s.connections;
    if (stats->struct_size > before_collectives) stats->collectives = s.collectives;
    if (stats->struct_size >= sizeof(pcclMasterStats_t)) stats->unreachable = s.unreachable;
    if (stats->struct_size >= before_reach) {
      stats->role = s.role;
      stats->term = s.term;
      stats->takeovers = s.takeovers;
      stats->step_downs = s.step_downs;
    }
    if (stats->struct_size >= before_roles) {
      stats->measuring = s.measuring ? 1 : 0;
      stats->topology_surveys = s.topology_surveys;
      stats->links_measured = s.links_measured;
      stats->links_known = s.links_known;
      stats->predicted_bottleneck = s.predicted_bottleneck;
      stats->join_order_bottleneck = s.join_order_bottleneck;
    }
    return pcclSuccess;
  });
}

pcclResult_t pcclMasterStop(pcclMaster_t master) {
  return onMaster(master, [&](MasterEntry& m) { return fromStatus(m.impl->stop()); });
}

pcclResult_t pcclMasterDestroy(pcclMaster_t master) {
  return pccl::capi::guarded([&]() -> pcclResult_t {
    if (master == nullptr) return pcclSuccess;
    const uintptr_t key = pccl::capi::valueOf(master);
    std::shared_ptr<MasterEntry> entry = pccl::capi::masters().remove(key);
    if (!entry) return fail(pcclInvalidArgument, pccl::capi::badHandle(key, pccl::capi::HandleKind::kMaster));
    // Stops serving now, even when calls on other threads still hold the master (the last of them
    // frees it as it returns).
    (void)entry->impl->stop();
    entry.reset();
    return pcclSuccess;
  });
}

}  // extern "C"
