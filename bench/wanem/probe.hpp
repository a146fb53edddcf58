// RTT between two rank namespaces: a TCP ping-pong of one byte, from a thread in each namespace.
#ifndef PCCL_WANEM_PROBE_HPP_
#define PCCL_WANEM_PROBE_HPP_

#include <string>

namespace pccl::wanem {

struct ProbeResult {
  bool ok = false;
  std::string error;
  double median_ms = 0, min_ms = 0;
};

ProbeResult probeRtt(const std::string& client_ns, const std::string& server_ns, const std::string& server_addr,
                     int rounds);

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_PROBE_HPP_
