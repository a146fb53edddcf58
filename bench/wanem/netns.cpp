#include "netns.hpp"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pccl::wanem {

namespace {
std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
bool writeFile(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value << "\n";
  return static_cast<bool>(f);
}
}  // namespace

int runCommand(const std::vector<std::string>& argv, std::string* out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (out != nullptr) *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Network::Network(NetConfig c) : c_(std::move(c)) {
  prefix_ = "pw" + std::to_string(getpid());
  for (int r = 0; r < c_.ranks; ++r) rank_ns_.push_back(prefix_ + "n" + std::to_string(r));
}

Network::~Network() { teardown(); }

std::string Network::rankAddr(int r) const { return "10.201." + std::to_string(r) + ".2"; }
uint32_t Network::rankAddrValue(int r) const { return (10u << 24) | (201u << 16) | (static_cast<uint32_t>(r) << 8) | 2u; }

bool Network::enter(const std::string& name, std::string* error) {
  const std::string path = "/var/run/netns/" + name;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    *error = "cannot enter network namespace " + name + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return false;
  }
  close(fd);
  return true;
}

bool Network::openTun(int rank, std::string* error) {
  const int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0 || !enter(rank_ns_[static_cast<size_t>(rank)], error)) {
    if (self >= 0) close(self);
    return false;
  }
  // One queue per core, each read and written by its own router lane. The device is created in the
  // namespace of the thread that opens it: the rank's own interface, so that what the rank sends is in
  // the router's hands at once (no veth, no forwarding, no backlog between).
  bool ok = true;
  for (size_t q = 0; ok && q < tun_fds_.size(); ++q) {
    const int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);  // a lane drains until EAGAIN
    ifreq ifr{};
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE;
    std::strncpy(ifr.ifr_name, "eth0", IFNAMSIZ - 1);
    ok = fd >= 0 && ioctl(fd, TUNSETIFF, &ifr) == 0;
    // Accept GSO super-packets (checksum offload + TSO), as the prototype measured: ~5x less router CPU.
    const unsigned offload = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
    ok = ok && ioctl(fd, TUNSETOFFLOAD, offload) == 0;
    if (fd >= 0) tun_fds_[q].push_back(fd);
  }
  if (!ok) *error = "cannot create the TUN device of rank " + std::to_string(rank) + ": " + std::strerror(errno);
  setns(self, CLONE_NEWNET);
  close(self);
  return ok;
}

bool Network::setUp(std::string* error) {
  up_ = true;
  auto ip = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "ip");
    std::string out;
    if (runCommand(args, &out) != 0) {
      std::string cmd;
      for (const auto& a : args) cmd += a + " ";
      *error = "'" + cmd + "' failed: " + out;
      return false;
    }
    return true;
  };
  // sysctl by writing /proc/sys inside the namespace (no dependency on procps).
  auto nsSysctl = [&](const std::string& ns, const std::string& key, const std::string& value) {
    std::string path = "/proc/sys/" + key;
    std::replace(path.begin() + 10, path.end(), '.', '/');
    return ip({"netns", "exec", ns, "sh", "-c", "echo '" + value + "' > " + path});
  };
  if (!c_.cc.empty()) {
    // A namespace may only choose an algorithm the host allows: add it for the run, restore it after.
    const std::string allowed = readFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
    if ((" " + allowed + " ").find(" " + c_.cc + " ") == std::string::npos) {
      saved_allowed_cc_ = allowed;
      runCommand({"modprobe", "tcp_" + c_.cc});
      if (!writeFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control", allowed + " " + c_.cc)) {
        *error = "cannot allow congestion control " + c_.cc + " on this host";
        return teardown(), false;
      }
    }
  }
  const long queues = std::max(1L, std::min(4L, sysconf(_SC_NPROCESSORS_ONLN)));
  tun_fds_.assign(static_cast<size_t>(queues), {});
  bool ok = true;
  for (int r = 0; ok && r < c_.ranks; ++r) {
    const std::string& ns = rank_ns_[static_cast<size_t>(r)];
    ok = ip({"netns", "add", ns}) && nsSysctl(ns, "net.ipv6.conf.all.disable_ipv6", "1") && openTun(r, error) &&
         ip({"-n", ns, "addr", "add", rankAddr(r) + "/16", "dev", "eth0"}) &&
         ip({"-n", ns, "link", "set", "eth0", "txqueuelen", "2000", "up"}) &&
         ip({"-n", ns, "link", "set", "lo", "up"}) && ip({"-n", ns, "route", "add", "default", "dev", "eth0"}) &&
         // Long fat pipes need large socket buffers (net.core.*mem_max cannot change in a namespace).
         nsSysctl(ns, "net.ipv4.tcp_rmem", "4096 131072 67108864") &&
         nsSysctl(ns, "net.ipv4.tcp_wmem", "4096 65536 67108864") &&
         (c_.min_tso_segs <= 0 || nsSysctl(ns, "net.ipv4.tcp_min_tso_segs", std::to_string(c_.min_tso_segs))) &&
         (c_.cc.empty() || nsSysctl(ns, "net.ipv4.tcp_congestion_control", c_.cc));
  }
  for (int r = 0; ok && r < c_.ranks; ++r) ok = openNetlink(rank_ns_[static_cast<size_t>(r)], error);
  if (!ok) teardown();
  return ok;
}

bool Network::openNetlink(const std::string& ns, std::string* error) {
  const int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0 || !enter(ns, error)) {
    if (self >= 0) close(self);
    return false;
  }
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);  // stays in `ns`
  setns(self, CLONE_NEWNET);
  close(self);
  if (fd < 0) return *error = std::string("cannot open a netlink socket: ") + std::strerror(errno), false;
  netlink_fds_.push_back(fd);
  return true;
}

namespace {
// Sum of rx_dropped + tx_dropped over every link of the namespace `fd` lives in (RTM_GETLINK dump).
uint64_t linkDrops(int fd) {
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
  } req{};
  req.nh.nlmsg_len = sizeof req;
  req.nh.nlmsg_type = RTM_GETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.ifi.ifi_family = AF_UNSPEC;
  if (::send(fd, &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) return 0;
  uint64_t drops = 0;
  std::vector<char> buf(1 << 16);
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) return drops;
    auto len = static_cast<unsigned>(n);
    for (auto* nh = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len)) {
      if (nh->nlmsg_type == NLMSG_DONE || nh->nlmsg_type == NLMSG_ERROR) return drops;
      if (nh->nlmsg_type != RTM_NEWLINK) continue;
      auto* ifi = static_cast<ifinfomsg*>(NLMSG_DATA(nh));
      int alen = static_cast<int>(IFLA_PAYLOAD(nh));
      for (auto* a = IFLA_RTA(ifi); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
        if (a->rta_type != IFLA_STATS64 || RTA_PAYLOAD(a) < sizeof(rtnl_link_stats64)) continue;
        rtnl_link_stats64 st;
        std::memcpy(&st, RTA_DATA(a), sizeof st);
        drops += st.rx_dropped + st.tx_dropped;
      }
    }
  }
}

// Column 2 of /proc/net/softnet_stat (hex, one line per CPU): packets dropped because a CPU's backlog
// was full. Host-wide: any increase during a run is counted against the emulator.
uint64_t backlogDrops() {
  std::ifstream f("/proc/net/softnet_stat");
  std::string line;
  uint64_t drops = 0;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string processed, dropped;
    if (in >> processed >> dropped) drops += std::strtoull(dropped.c_str(), nullptr, 16);
  }
  return drops;
}
}  // namespace

uint64_t Network::kernelDrops() const {
  uint64_t drops = backlogDrops();
  for (int fd : netlink_fds_) drops += linkDrops(fd);
  return drops;
}

void Network::teardown() {
  if (!up_) return;
  up_ = false;
  for (const auto& queue : tun_fds_) {
    for (int fd : queue) close(fd);
  }
  tun_fds_.clear();
  for (int fd : netlink_fds_) close(fd);
  netlink_fds_.clear();
  for (const auto& ns : rank_ns_) runCommand({"ip", "netns", "del", ns});
  if (!saved_allowed_cc_.empty()) writeFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control", saved_allowed_cc_);
}

int Network::cleanupStale() {
  std::string out;
  runCommand({"ip", "netns", "list"}, &out);
  std::istringstream in(out);
  std::string line;
  int removed = 0;
  while (std::getline(in, line)) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.rfind("pw", 0) == 0 && name.size() > 3 && std::isdigit(static_cast<unsigned char>(name[2]))) {
      removed += runCommand({"ip", "netns", "del", name}) == 0;
    }
  }
  return removed;
}

}  // namespace pccl::wanem
