// Probes of the emulated paths, from a thread in each of two rank namespaces: the RTT of a one-byte TCP
// ping-pong, and the goodput of one bulk TCP flow.
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

struct RateResult {
  bool ok = false;
  std::string error;
  double goodput_mbit = 0;  // TCP payload received per second over the second half of the transfer
};

// Sends as fast as one TCP flow can from `sender_ns` to `receiver_addr` (in `receiver_ns`) for `seconds`.
RateResult probeRate(const std::string& sender_ns, const std::string& receiver_ns, const std::string& receiver_addr,
                     double seconds);

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_PROBE_HPP_
