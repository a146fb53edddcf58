// The kernel half of the WAN: one network namespace per rank and one for the router, veth pairs
// between them, tbf shaping on both ends of each rank's link, policy routing of every packet from a
// rank into the router's TUN device, per-namespace TCP settings. Everything is named after our pid and
// removed by teardown() (also after a crash: `pccl-wanem --cleanup`).
#ifndef PCCL_WANEM_NETNS_HPP_
#define PCCL_WANEM_NETNS_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace pccl::wanem {

struct NetConfig {
  int ranks = 2;
  std::vector<double> rate_mbit;  // per rank; 0 = unshaped
  std::string cc;                 // congestion control in every rank namespace ("" = keep the default)
};

class Network {
 public:
  explicit Network(NetConfig c);
  ~Network();  // tears down

  // Creates everything; on failure *error says what and teardown() has already run.
  bool setUp(std::string* error);
  void teardown();
  const std::vector<int>& tunFds() const { return tun_fds_; }
  const std::string& rankNs(int r) const { return rank_ns_[static_cast<size_t>(r)]; }
  const std::string& routerNs() const { return router_ns_; }
  std::string rankAddr(int r) const;  // dotted IPv4
  uint32_t rankAddrValue(int r) const;
  uint64_t tunDrops() const;          // packets the kernel dropped on their way to the TUN reader

  // Enters the namespace `name` on the calling thread (for rank commands and probes).
  static bool enter(const std::string& name, std::string* error);
  // Removes every namespace a pccl-wanem ever left behind.
  static int cleanupStale();

 private:
  bool openTun(std::string* error);

  NetConfig c_;
  std::string prefix_, router_ns_;
  std::vector<std::string> rank_ns_;
  std::vector<int> tun_fds_;  // one per queue of the multi-queue TUN
  bool up_ = false;
  std::string saved_allowed_cc_;  // host setting to restore
};

// Runs argv (no shell), returns its exit status; output goes to *out when given.
int runCommand(const std::vector<std::string>& argv, std::string* out = nullptr);

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_NETNS_HPP_
