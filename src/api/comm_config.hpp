// The communicator's configuration checks and the topology it reports (pure functions).
#ifndef PCCL_API_COMM_CONFIG_HPP_
#define PCCL_API_COMM_CONFIG_HPP_

#include <vector>

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

// CommConfig::gather_bytes when none was given: PCCL_GATHER_BYTES, else this.
inline constexpr int64_t kDefaultGatherBytes = 4 << 20;
// gather_bytes = -1 becomes PCCL_GATHER_BYTES, else kDefaultGatherBytes; InvalidArgument for a bad variable.
Status resolveGatherBytes(CommConfig& config);

// What a TopologyUpdate's ring means for the peer `self`.
Topology topologyFrom(const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self, uint64_t epoch);

}  // namespace pccl

#endif  // PCCL_API_COMM_CONFIG_HPP_
