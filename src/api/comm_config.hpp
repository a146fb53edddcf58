// The communicator's configuration checks and the topology it reports (pure functions).
#ifndef PCCL_API_COMM_CONFIG_HPP_
#define PCCL_API_COMM_CONFIG_HPP_

#include <memory>
#include <vector>

#include "collective/two_level_plan.hpp"
#include "net/endpoint.hpp"
#include "peer/ring_pool.hpp"
#include "pccl/communicator.hpp"
#include "wire/messages.hpp"

namespace pccl {

// Every range and relation CommConfig's fields must satisfy (addresses and the secret are checked
// where they are parsed). InvalidArgument naming the field.
Status checkCommConfig(const CommConfig& config);

// The run's secret (config, else PCCL_SECRET, else PCCL_SECRET_FILE) and whether to encrypt (config,
// else PCCL_ENCRYPT) into `config`, in place (no copy of the secret is made). InvalidArgument for
// encryption without a secret or a bad variable.
Status resolveCredentials(CommConfig& config);

// CommConfig::gather_bytes when none was given (-1) and PCCL_GATHER_BYTES is not set: on a ring whose
// members are all on one host the extra bytes of gathering cost CPU time the ring's hops do not
// (docs/benchmarks.md), across hosts the hops cost round trips.
inline constexpr int64_t kDefaultGatherBytes = 1 << 20;
inline constexpr int64_t kOneHostGatherBytes = 256 << 10;
// gather_bytes = -1 becomes PCCL_GATHER_BYTES when set (else stays -1); InvalidArgument for a bad variable.
Status resolveGatherBytes(CommConfig& config);
// The limit for a ring of the group: the configured one, else by where the members are.
uint64_t gatherLimit(const CommConfig& config, bool one_host);

// same_host_reads = -1 becomes PCCL_SAME_HOST_READS ("0" or "1") when set, else 1; InvalidArgument for
// another value of either.
Status resolveSameHostReads(CommConfig& config);

// inbound = -1 becomes PCCL_INBOUND ("0" or "1") when set, else 1; InvalidArgument for another value.
Status resolveInbound(CommConfig& config);

// With connections_per_peer 0 (each link tunes itself), max_connections_per_peer 0 becomes
// PCCL_MAX_CONNECTIONS when set, else kDefaultMaxConnections; InvalidArgument for a bad variable.
inline constexpr uint32_t kDefaultMaxConnections = 32;
Status resolveConnections(CommConfig& config);
// The connections each link opens: K, or the pool of a tuned link.
uint32_t linkConnections(const CommConfig& config);
// Whether links choose how many of their connections carry data.
inline bool tunedConnections(const CommConfig& config) { return config.connections_per_peer == 0; }
// What each source of a shared-state sync opens when links tune themselves (a sync is not tuned).
inline constexpr uint32_t kSyncConnections = 16;

// master_reconnect_ms = -1 becomes PCCL_RECONNECT_MS when set, else 30000; InvalidArgument for a bad value.
Status resolveReconnect(CommConfig& config);
// region empty becomes PCCL_REGION when set; InvalidArgument for a name too long, with a character
// outside [A-Za-z0-9._-], or starting with wire::kAutoRegionPrefix (the master names detected regions so).
Status resolveRegion(CommConfig& config);
// algorithm empty becomes PCCL_ALGORITHM when set, else "auto"; InvalidArgument for anything but
// "auto", "flat" or "hierarchical".
Status resolveAlgorithm(CommConfig& config);
// What a resolved CommConfig::algorithm asks the master for (wire::Levels).
uint8_t levelsAsked(const CommConfig& config);
// master_address: one HOST:PORT or a comma-separated list of them (spaces around entries ignored).
Result<std::vector<net::HostPort>> parseMasterList(const std::string& text);

// What a TopologyUpdate's ring means for the peer `self`.
Topology topologyFrom(const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self, uint64_t epoch);
// Our group's two-level plan when the master made the group two-level (else nullptr), and the links
// it needs beyond the ring neighbours' (collective::twoLevelLinks), added to `plan`.
std::shared_ptr<const collective::TwoLevelRing> twoLevelOf(const std::vector<wire::MemberInfo>& ring,
                                                           const wire::Uuid& self);
void addTwoLevelLinks(peer::RingPlan& plan, const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self,
                      const collective::TwoLevelRing& two);

}  // namespace pccl

#endif  // PCCL_API_COMM_CONFIG_HPP_
