// The communicator's C API: create, join, membership, attributes, counters, destroy.
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "capi/args.hpp"
#include "capi/calls.hpp"

using pccl::capi::CommEntry;
using pccl::capi::fail;
using pccl::capi::fromStatus;
using pccl::capi::onComm;

namespace {

pccl::CommConfig commConfigFrom(const pcclCommConfig_t& config) {
  pccl::CommConfig c;
  c.master_address = config.master_address;
  if (config.listen_address != nullptr) c.listen_address = config.listen_address;
  if (config.advertise_host != nullptr) c.advertise_host = config.advertise_host;
  c.peer_group = config.peer_group;
  c.connections_per_peer = config.connections_per_peer;
  c.heartbeat_interval_ms = config.heartbeat_interval_ms;
  c.peer_timeout_ms = config.peer_timeout_ms;
  c.connect_timeout_ms = config.connect_timeout_ms;
  c.handshake_timeout_ms = config.handshake_timeout_ms;
  pccl::capi::copySecret(config.secret, config.secret_len, &c.secret);
  c.encrypt = config.encrypt != 0;
  c.op_timeout_ms = config.op_timeout_ms;
  c.segment_bytes = config.segment_bytes;
  c.same_host_connections = config.same_host_connections;
  c.max_concurrent_ops = config.max_concurrent_ops;
  c.master_reconnect_ms = config.master_reconnect_ms;
  if (config.region != nullptr) c.region = config.region;
  if (config.algorithm != nullptr) c.algorithm = config.algorithm;
  c.gather_bytes = config.gather_bytes;
  c.inbound = config.inbound;
  return c;
}

int64_t cipherCode(const std::string& cipher) { return cipher == "none" ? 0 : cipher == "AES-256-GCM" ? 2 : 1; }

}  // namespace

extern "C" {

pcclResult_t pcclCommCreate(const pcclCommConfig_t* config, pcclComm_t* comm) {
  return pccl::capi::guarded([&]() -> pcclResult_t {
    PCCL_CHECK_PTR(config);
    PCCL_CHECK_PTR(comm);
    *comm = nullptr;
    // A struct from an older header (before master_reconnect_ms, region, algorithm, gather_bytes or inbound) is
    // accepted: the fields it lacks keep their defaults.
    const uint32_t oldest = static_cast<uint32_t>(offsetof(pcclCommConfig_t, master_reconnect_ms));
    const uint32_t older = static_cast<uint32_t>(offsetof(pcclCommConfig_t, region));
    const uint32_t old = static_cast<uint32_t>(offsetof(pcclCommConfig_t, algorithm));
    const uint32_t recent = static_cast<uint32_t>(offsetof(pcclCommConfig_t, gather_bytes));
    const uint32_t latest = static_cast<uint32_t>(offsetof(pcclCommConfig_t, inbound));
    const bool known = config->struct_size == oldest || config->struct_size == older || config->struct_size == old ||
                       config->struct_size == recent || config->struct_size == latest;
    pcclResult_t r = pccl::capi::checkConfigHeader(
        known ? static_cast<uint32_t>(sizeof(pcclCommConfig_t)) : config->struct_size, sizeof(pcclCommConfig_t),
        config->config_version, "pcclCommConfig_t");
    if (r != pcclSuccess) return r;
    pcclCommConfig_t full = PCCL_COMM_CONFIG_INIT;  // only the fields an older struct has are read from it
    std::memcpy(&full, config, known ? config->struct_size : sizeof(full));
    full.struct_size = static_cast<uint32_t>(sizeof(full));
    config = &full;
    if (config->master_address == nullptr) return fail(pcclInvalidArgument, "master_address must be set (HOST:PORT)");
    if (config->secret == nullptr && config->secret_len != 0) {
      return fail(pcclInvalidArgument, "secret is NULL but secret_len is not 0");
    }
    const uintptr_t key = pccl::capi::reserveHandle(pccl::capi::HandleKind::kComm);
    if (key == 0) return fail(pcclSystemError, "no communicator handles left in this process");
    auto created = pccl::Communicator::create(commConfigFrom(*config));
    if (!created.isOk()) return fromStatus(created.status());
    auto entry = std::make_shared<CommEntry>();
    entry->impl = std::move(created).value();
    entry->peer_group = config->peer_group;
    pccl::capi::comms().insert(key, std::move(entry));
    *comm = pccl::capi::handleOf<pcclComm>(key);
    return pcclSuccess;
  });
}

pcclResult_t pcclConnect(pcclComm_t comm) {
  return onComm(comm, [&](CommEntry& c) { return fromStatus(c.impl->connect()); });
}

pcclResult_t pcclUpdateTopology(pcclComm_t comm) {
  return onComm(comm, [&](CommEntry& c) { return fromStatus(c.impl->updateTopology()); });
}

pcclResult_t pcclOptimizeTopology(pcclComm_t comm) {
  return onComm(comm, [&](CommEntry& c) { return fromStatus(c.impl->optimizeTopology()); });
}

pcclResult_t pcclGetLinks(pcclComm_t comm, pcclLink_t* links, size_t capacity, size_t* count) {
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    PCCL_CHECK_PTR(count);
    if (links == nullptr && capacity != 0) return fail(pcclInvalidArgument, "links is NULL but capacity is not 0");
    auto r = c.impl->links();
    if (!r.isOk()) return fromStatus(r.status());
    *count = r->size();
    for (size_t i = 0; i < r->size() && i < capacity; ++i) {
      const pccl::LinkInfo& l = (*r)[i];
      links[i] = pcclLink_t{l.from_rank, l.to_rank, l.bandwidth, l.rtt_s};
    }
    return pcclSuccess;
  });
}

namespace {
// Member `rank` of the last completed ring.
pcclResult_t ringMember(CommEntry& c, uint32_t rank, pccl::RingMember* out) {
  const pccl::Topology t = c.impl->topology();
  if (t.ring.empty()) return fail(pcclInvalidUsage, "no ring installed yet: call pcclConnect first");
  if (rank >= t.ring.size()) {
    return fail(pcclInvalidArgument, "rank " + std::to_string(rank) + " is outside the ring of " +
                                         std::to_string(t.ring.size()) + " members (epoch " + std::to_string(t.epoch) +
                                         ")");
  }
  *out = t.ring[rank];
  return pcclSuccess;
}
}  // namespace

pcclResult_t pcclGetRegion(pcclComm_t comm, uint32_t rank, char* buf, size_t capacity, size_t* length) {
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    PCCL_CHECK_PTR(length);
    if (buf == nullptr && capacity != 0) return fail(pcclInvalidArgument, "buf is NULL but capacity is not 0");
    pccl::RingMember member;
    if (pcclResult_t r = ringMember(c, rank, &member); r != pcclSuccess) return r;
    const std::string& region = member.region;
    *length = region.size();
    if (buf == nullptr) return pcclSuccess;  // a size query
    if (capacity <= region.size()) {
      if (capacity > 0) buf[0] = '\0';
      return fail(pcclInvalidArgument, "buf of " + std::to_string(capacity) + " bytes is too small for region '" +
                                           region + "' of rank " + std::to_string(rank) + " (needs " +
                                           std::to_string(region.size() + 1) + ")");
    }
    std::memcpy(buf, region.c_str(), region.size() + 1);
    return pcclSuccess;
  });
}

pcclResult_t pcclGetInbound(pcclComm_t comm, uint32_t rank, int* inbound) {
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    PCCL_CHECK_PTR(inbound);
    pccl::RingMember member;
    if (pcclResult_t r = ringMember(c, rank, &member); r != pcclSuccess) return r;
    *inbound = member.inbound ? 1 : 0;
    return pcclSuccess;
  });
}

pcclResult_t pcclArePeersPending(pcclComm_t comm, int* pending) {
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    PCCL_CHECK_PTR(pending);
    auto r = c.impl->arePeersPending();
    if (!r.isOk()) return fromStatus(r.status());
    *pending = *r ? 1 : 0;
    return pcclSuccess;
  });
}

pcclResult_t pcclGetAttribute(pcclComm_t comm, pcclAttribute_t attr, int64_t* value) {
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    PCCL_CHECK_PTR(value);
    pccl::Topology t = c.impl->topology();
    const int a = pccl::capi::rawEnum(attr);
    switch (a) {
      case PCCL_ATTR_WORLD_SIZE: *value = t.world_size; return pcclSuccess;
      case PCCL_ATTR_RANK: *value = t.rank; return pcclSuccess;
      case PCCL_ATTR_GROUP_WORLD_SIZE: *value = t.group_world_size; return pcclSuccess;
      case PCCL_ATTR_GROUP_RANK: *value = t.group_rank; return pcclSuccess;
      case PCCL_ATTR_EPOCH: *value = static_cast<int64_t>(t.epoch); return pcclSuccess;
      case PCCL_ATTR_PEER_GROUP: *value = c.peer_group; return pcclSuccess;
      case PCCL_ATTR_LISTEN_PORT: *value = c.impl->listenPort(); return pcclSuccess;
      case PCCL_ATTR_RING_CONNECTIONS: *value = t.successor_connections; return pcclSuccess;
      case PCCL_ATTR_CIPHER: *value = cipherCode(c.impl->cipher()); return pcclSuccess;
      case PCCL_ATTR_HIERARCHICAL: *value = t.hierarchical ? 1 : 0; return pcclSuccess;
    }
    return fail(pcclInvalidArgument, "unknown attribute " + std::to_string(a));
  });
}

pcclResult_t pcclGetStats(pcclComm_t comm, pcclCommStats_t* stats) {
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    PCCL_CHECK_PTR(stats);
    // The struct before same_host_read_bytes was appended is accepted too (and filled up to it).
    const size_t before_reads = offsetof(pcclCommStats_t, same_host_read_bytes);
    const size_t before_master = offsetof(pcclCommStats_t, master_losses);
    const size_t before_ring = offsetof(pcclCommStats_t, ring_reconnects);
    const size_t before_tuning = offsetof(pcclCommStats_t, ring_active_connections);
    const size_t before_relays = offsetof(pcclCommStats_t, relayed_bytes);
    if (stats->struct_size != sizeof(pcclCommStats_t) && stats->struct_size != before_reads &&
        stats->struct_size != before_master && stats->struct_size != before_ring &&
        stats->struct_size != before_tuning && stats->struct_size != before_relays) {
      return fail(pcclInvalidArgument, "pcclCommStats_t was not initialised with PCCL_COMM_STATS_INIT (struct_size " +
                                           std::to_string(stats->struct_size) + ")");
    }
    const pccl::CommStats s = c.impl->stats();
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
    if (stats->struct_size >= before_master) stats->same_host_read_bytes = s.same_host_read_bytes;
    if (stats->struct_size >= before_ring) {
      stats->master_losses = s.master_losses;
      stats->master_returns = s.master_returns;
      stats->master_away_ms = s.master_away_ms;
    }
    if (stats->struct_size >= before_tuning) {
      stats->ring_reconnects = s.ring_reconnects;
      stats->ring_resent_bytes = s.ring_resent_bytes;
      stats->ring_stalled_ms = s.ring_stalled_ms;
    }
    if (stats->struct_size >= before_relays) {
      stats->ring_active_connections = s.ring_active_connections;
      stats->ring_connection_changes = s.ring_connection_changes;
    }
    if (stats->struct_size >= sizeof(pcclCommStats_t)) stats->relayed_bytes = s.relayed_bytes;
    return pcclSuccess;
  });
}

pcclResult_t pcclCommDestroy(pcclComm_t comm) {
  return pccl::capi::guarded([&]() -> pcclResult_t {
    if (comm == nullptr) return pcclSuccess;
    const uintptr_t key = pccl::capi::valueOf(comm);
    std::shared_ptr<CommEntry> entry = pccl::capi::comms().remove(key);
    if (!entry) return fail(pcclInvalidArgument, pccl::capi::badHandle(key, pccl::capi::HandleKind::kComm));
    // Leaves and frees the communicator now, or, when calls on other threads still hold it, as the
    // last of them returns.
    entry.reset();
    return pcclSuccess;
  });
}

}  // extern "C"
