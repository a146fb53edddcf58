// The kernel half of the WAN: one network namespace per rank whose only interface (eth0) is a
// multi-queue TUN device read and written by the router (every packet a rank sends to another goes
// through it: the rates, queues, losses and delays are all the router's), per-namespace TCP settings,
// and the kernel's drop counters. Everything is named after our pid and removed by teardown() (also
// after a crash: `pccl-wanem --cleanup`).
#ifndef PCCL_WANEM_NETNS_HPP_
#define PCCL_WANEM_NETNS_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace pccl::wanem {

struct NetConfig {
  int ranks = 2;
  std::string cc;                 // congestion control in every rank namespace ("" = keep the default)
  int min_tso_segs = 0;           // net.ipv4.tcp_min_tso_segs in every rank namespace (0 = kernel default, 2)
};

class Network {
 public:
  explicit Network(NetConfig c);
  ~Network();  // tears down

  // Creates everything; on failure *error says what and teardown() has already run.
  bool setUp(std::string* error);
  void teardown();
  // [queue][rank]: the file descriptor of each rank's TUN queue, one row per router lane.
  const std::vector<std::vector<int>>& tunFds() const { return tun_fds_; }
  const std::string& rankNs(int r) const { return rank_ns_[static_cast<size_t>(r)]; }
  std::string rankAddr(int r) const;  // dotted IPv4
  uint32_t rankAddrValue(int r) const;
  // Packets the kernel dropped on the emulator's devices so far: every device's rx/tx drops in every
  // namespace of ours (a TUN queue overflowing) plus the host's per-CPU backlog drops
  // (/proc/net/softnet_stat). Any increase is the emulator's fault, never the model's.
  uint64_t kernelDrops() const;

  // Enters the namespace `name` on the calling thread (for rank commands and probes).
  static bool enter(const std::string& name, std::string* error);
  // Removes every namespace a pccl-wanem ever left behind.
  static int cleanupStale();

 private:
  bool openTun(int rank, std::string* error);
  bool openNetlink(const std::string& ns, std::string* error);

  NetConfig c_;
  std::string prefix_;
  std::vector<std::string> rank_ns_;
  std::vector<std::vector<int>> tun_fds_;  // [queue][rank]
  std::vector<int> netlink_fds_;  // a route netlink socket in each of our namespaces (for drop counters)
  bool up_ = false;
  std::string saved_allowed_cc_;  // host setting to restore
};

// Runs argv (no shell), returns its exit status; output goes to *out when given.
int runCommand(const std::vector<std::string>& argv, std::string* out = nullptr);

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_NETNS_HPP_
