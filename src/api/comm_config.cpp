#include "api/comm_config.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "util/log.hpp"
#include "util/secret.hpp"
#include "wire/data.hpp"

namespace pccl {

Status checkCommConfig(const CommConfig& config) {
  (void)log::level();  // reads PCCL_LOG_LEVEL now, so a bad value is reported at create, not at the first event
  if (config.connections_per_peer > 1024) {
    return Status::invalidArgument(
        fmt::format("connections_per_peer must be 0 (tuned per link) or 1..1024, got {}", config.connections_per_peer));
  }
  if (config.max_connections_per_peer > 1024) {
    return Status::invalidArgument(fmt::format("max_connections_per_peer must be 0 (PCCL_MAX_CONNECTIONS, else {}) or 1..1024, got {}",
                                               kDefaultMaxConnections, config.max_connections_per_peer));
  }
  if (config.same_host_connections > 1024) {
    return Status::invalidArgument(
        fmt::format("same_host_connections must be 0..1024 (0: as connections_per_peer), got {}",
                    config.same_host_connections));
  }
  if (config.heartbeat_interval_ms == 0 || config.peer_timeout_ms <= config.heartbeat_interval_ms) {
    return Status::invalidArgument(fmt::format("need 0 < heartbeat_interval_ms ({}) < peer_timeout_ms ({})",
                                               config.heartbeat_interval_ms, config.peer_timeout_ms));
  }
  if (config.connect_timeout_ms == 0 || config.handshake_timeout_ms == 0) {
    return Status::invalidArgument("connect_timeout_ms and handshake_timeout_ms must be > 0");
  }
  if (config.op_timeout_ms == 0) return Status::invalidArgument("op_timeout_ms must be > 0");
  if (config.max_concurrent_ops == 0 || config.max_concurrent_ops > 65536) {
    return Status::invalidArgument(fmt::format("max_concurrent_ops must be 1..65536, got {}", config.max_concurrent_ops));
  }
  if (config.segment_bytes < 64 || config.segment_bytes > wire::kMaxDataPayload) {
    return Status::invalidArgument(fmt::format("segment_bytes must be 64..{}, got {}", wire::kMaxDataPayload,
                                               config.segment_bytes));
  }
  if (config.advertise_host.size() > 255) return Status::invalidArgument("advertise_host longer than 255 bytes");
  if (config.gather_bytes < -1 || config.gather_bytes > static_cast<int64_t>(wire::kEagerBytes)) {
    return Status::invalidArgument(fmt::format("gather_bytes must be -1 (PCCL_GATHER_BYTES, else by hosts) or 0..{}, got {}",
                                               wire::kEagerBytes, config.gather_bytes));
  }
  return Status::ok();
}

Status resolveConnections(CommConfig& config) {
  if (config.connections_per_peer != 0 || config.max_connections_per_peer != 0) return Status::ok();
  config.max_connections_per_peer = kDefaultMaxConnections;
  const char* env = std::getenv("PCCL_MAX_CONNECTIONS");
  if (env == nullptr || *env == '\0') return Status::ok();
  char* end = nullptr;
  const unsigned long v = std::strtoul(env, &end, 10);
  if (*env == '-' || *end != '\0' || v == 0 || v > 1024) {
    return Status::invalidArgument(fmt::format("PCCL_MAX_CONNECTIONS='{}': connections 1..1024 expected", env));
  }
  config.max_connections_per_peer = static_cast<uint32_t>(v);
  return Status::ok();
}

uint32_t linkConnections(const CommConfig& config) {
  return config.connections_per_peer != 0 ? config.connections_per_peer : config.max_connections_per_peer;
}

Status resolveReconnect(CommConfig& config) {
  constexpr int64_t kMax = 86400000;
  constexpr int64_t kDefault = 30000;
  if (config.master_reconnect_ms < -1 || config.master_reconnect_ms > kMax) {
    return Status::invalidArgument(fmt::format(
        "master_reconnect_ms must be -1 (PCCL_RECONNECT_MS, else {}) or 0..{}, got {}", kDefault, kMax,
        config.master_reconnect_ms));
  }
  if (config.master_reconnect_ms >= 0) return Status::ok();
  config.master_reconnect_ms = kDefault;
  const char* env = std::getenv("PCCL_RECONNECT_MS");
  if (env == nullptr || *env == '\0') return Status::ok();
  char* end = nullptr;
  const unsigned long long v = std::strtoull(env, &end, 10);
  if (*env == '-' || *end != '\0' || v > static_cast<unsigned long long>(kMax)) {
    return Status::invalidArgument(fmt::format("PCCL_RECONNECT_MS='{}': milliseconds 0..{} expected", env, kMax));
  }
  config.master_reconnect_ms = static_cast<int64_t>(v);
  return Status::ok();
}

Status resolveRegion(CommConfig& config) {
  const bool from_env = config.region.empty();
  if (from_env) {
    const char* env = std::getenv("PCCL_REGION");
    if (env == nullptr || *env == '\0') return Status::ok();
    config.region = env;
  }
  const std::string what = from_env ? fmt::format("PCCL_REGION='{}'", config.region)
                                    : fmt::format("region '{}'", config.region);
  if (config.region.size() > wire::kMaxRegion) {
    return Status::invalidArgument(fmt::format("{}: at most {} bytes, got {}", what, wire::kMaxRegion, config.region.size()));
  }
  if (!wire::isValidRegion(config.region)) {
    return Status::invalidArgument(fmt::format("{}: only letters, digits, '.', '_' and '-' are allowed", what));
  }
  if (config.region.rfind(wire::kAutoRegionPrefix, 0) == 0) {
    return Status::invalidArgument(
        fmt::format("{}: names starting with '{}' are the master's (detected regions)", what, wire::kAutoRegionPrefix));
  }
  return Status::ok();
}

Status resolveAlgorithm(CommConfig& config) {
  const bool from_env = config.algorithm.empty();
  if (from_env) {
    const char* env = std::getenv("PCCL_ALGORITHM");
    config.algorithm = env != nullptr && *env != '\0' ? env : "auto";
  }
  if (config.algorithm != "auto" && config.algorithm != "flat" && config.algorithm != "hierarchical") {
    return Status::invalidArgument(fmt::format("{}'{}': expected auto, flat or hierarchical",
                                               from_env ? "PCCL_ALGORITHM=" : "algorithm ", config.algorithm));
  }
  return Status::ok();
}

uint8_t levelsAsked(const CommConfig& config) {
  if (config.algorithm == "flat") return static_cast<uint8_t>(wire::Levels::kFlat);
  if (config.algorithm == "hierarchical") return static_cast<uint8_t>(wire::Levels::kTwoLevel);
  return static_cast<uint8_t>(wire::Levels::kAuto);
}

Result<std::vector<net::HostPort>> parseMasterList(const std::string& text) {
  std::vector<net::HostPort> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(at, comma - at);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) {
      return Status::invalidArgument(fmt::format("master_address '{}' has an empty entry (HOST:PORT[,HOST:PORT...])", text));
    }
    PCCL_ASSIGN_OR_RETURN(net::HostPort hp, net::parseHostPort(item, "master_address"));
    out.push_back(std::move(hp));
    if (out.size() > 64) return Status::invalidArgument("master_address lists more than 64 masters");
    at = comma + 1;
  }
  return out;
}

Status resolveGatherBytes(CommConfig& config) {
  if (config.gather_bytes >= 0) return Status::ok();
  const char* env = std::getenv("PCCL_GATHER_BYTES");
  if (env == nullptr || *env == '\0') return Status::ok();
  char* end = nullptr;
  const unsigned long long v = std::strtoull(env, &end, 10);
  if (*env == '-' || *end != '\0' || v > wire::kEagerBytes) {
    return Status::invalidArgument(fmt::format("PCCL_GATHER_BYTES='{}': bytes 0..{} expected", env, wire::kEagerBytes));
  }
  config.gather_bytes = static_cast<int64_t>(v);
  return Status::ok();
}

namespace {
// A -1/0/1 setting: -1 becomes the variable `env` ("0" or "1") when set, else 1.
Status resolveSwitch(int& value, const char* field, const char* env_name, const char* meaning) {
  if (value < -1 || value > 1) {
    return Status::invalidArgument(fmt::format("{} must be -1 ({}, else {}), 0 or 1, got {}", field, env_name, meaning, value));
  }
  if (value >= 0) return Status::ok();
  const char* env = std::getenv(env_name);
  if (env == nullptr || *env == '\0') {
    value = 1;
    return Status::ok();
  }
  const std::string v(env);
  if (v != "0" && v != "1") return Status::invalidArgument(fmt::format("{}='{}': 0 or 1 expected", env_name, v));
  value = v == "1" ? 1 : 0;
  return Status::ok();
}
}  // namespace

Status resolveSameHostReads(CommConfig& config) {
  return resolveSwitch(config.same_host_reads, "same_host_reads", "PCCL_SAME_HOST_READS", "on");
}

Status resolveInbound(CommConfig& config) {
  return resolveSwitch(config.inbound, "inbound", "PCCL_INBOUND", "accepted");
}

uint64_t gatherLimit(const CommConfig& config, bool one_host) {
  if (config.gather_bytes >= 0) return static_cast<uint64_t>(config.gather_bytes);
  return static_cast<uint64_t>(one_host ? kOneHostGatherBytes : kDefaultGatherBytes);
}

Status resolveCredentials(CommConfig& config) {
  PCCL_RETURN_IF_ERROR(resolveSecret(&config.secret));
  PCCL_ASSIGN_OR_RETURN(config.encrypt, resolveEncrypt(config.encrypt));
  if (config.encrypt && config.secret.empty()) {
    return Status::invalidArgument("encrypt needs a shared secret (config, PCCL_SECRET or PCCL_SECRET_FILE): the "
                                   "connection keys derive from it");
  }
  return Status::ok();
}

Topology topologyFrom(const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self, uint64_t epoch) {
  Topology t;
  t.epoch = epoch;
  t.world_size = static_cast<uint32_t>(ring.size());
  uint32_t group = 0;
  for (const auto& m : ring) {
    if (m.id == self) group = m.group;
  }
  for (size_t i = 0; i < ring.size(); ++i) {
    const auto& m = ring[i];
    if (m.id == self) {
      t.rank = static_cast<uint32_t>(i);
      t.group_rank = t.group_world_size;
    }
    if (m.group == group) ++t.group_world_size;
    t.ring.push_back(RingMember{m.id, m.host, m.port, m.group, m.region, m.inbound != 0});
    if (m.id == self) t.hierarchical = m.levels == static_cast<uint8_t>(wire::Levels::kTwoLevel);
  }
  return t;
}

namespace {
// Our group's members, in ring order (group rank = index).
std::vector<const wire::MemberInfo*> groupOf(const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self,
                                             uint32_t* rank) {
  const wire::MemberInfo* mine = nullptr;
  for (const auto& m : ring) mine = m.id == self ? &m : mine;
  std::vector<const wire::MemberInfo*> out;
  for (const auto& m : ring) {
    if (mine == nullptr || m.group != mine->group) continue;
    if (m.id == self && rank != nullptr) *rank = static_cast<uint32_t>(out.size());
    out.push_back(&m);
  }
  return out;
}
}  // namespace

std::shared_ptr<const collective::TwoLevelRing> twoLevelOf(const std::vector<wire::MemberInfo>& ring,
                                                           const wire::Uuid& self) {
  uint32_t rank = 0;
  const auto group = groupOf(ring, self, &rank);
  if (group.size() < 3 || group[rank]->levels != static_cast<uint8_t>(wire::Levels::kTwoLevel)) return nullptr;
  std::vector<std::string> regions;
  for (const auto* m : group) regions.push_back(m->region);
  auto two = std::make_shared<collective::TwoLevelRing>(collective::twoLevelRing(collective::regionLayout(regions)));
  if (two->layout.flat() || two->pieces() > collective::kMaxTwoLevelPieces) return nullptr;
  two->min_bytes = group[rank]->two_level_bytes;
  return two;
}

void addTwoLevelLinks(peer::RingPlan& plan, const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self,
                      const collective::TwoLevelRing& two) {
  uint32_t rank = 0;
  const auto group = groupOf(ring, self, &rank);
  for (const auto& link : collective::twoLevelLinks(two, rank)) {
    peer::RingPlan::Extra x;
    x.peer = *group[link.peer];
    x.rank = link.peer;
    x.dial = link.dial;
    // Whoever can dial, dials: a member that cannot be dialled opens its links (wire::opensLink).
    const wire::MemberInfo& me = *group[rank];
    if (me.inbound != x.peer.inbound && !wire::sameHost(me.host, x.peer.host)) x.dial = me.inbound == 0;
    x.connections = link.dial ? wire::linkConnections(*group[rank], x.peer) : wire::linkConnections(x.peer, *group[rank]);
    plan.extra.push_back(std::move(x));
  }
}

}  // namespace pccl
