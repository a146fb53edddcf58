// A C++17 program built against an installed pccl with find_package(pccl): the C++ API (pccl::Master,
// pccl::Communicator) from the installed headers. An embedded master on 127.0.0.1 (port 0), two peers
// on two threads, one all-reduce of a few doubles, every element checked. Prints "consumer ok" and
// exits 0 on success. Every call that waits has a deadline (the timeouts below).
#include <pccl/communicator.hpp>
#include <pccl/master.hpp>
#include <pccl/pccl.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if __cplusplus < 201703L
#error "pccl::pccl should bring C++17 to its consumers"
#endif

namespace {

constexpr int kPeers = 2;
constexpr size_t kCount = 9;

// One peer: join (the first admitted votes the second in), all-reduce, leave. "" on success.
std::string runPeer(int seed, pccl::Master& master, const std::string& address) {
  pccl::CommConfig config;
  config.master_address = address;
  config.listen_address = "127.0.0.1:0";
  config.secret = "consumer-secret";
  config.heartbeat_interval_ms = 200;
  config.peer_timeout_ms = 5000;
  config.connect_timeout_ms = 30000;
  config.op_timeout_ms = 30000;
  const std::string who = "peer " + std::to_string(seed) + ": ";
  auto comm = pccl::Communicator::create(config);
  if (!comm.isOk()) return who + "create: " + comm.status().toString();
  pccl::Communicator& c = **comm;
  if (auto s = c.connect(); !s.isOk()) return who + "connect: " + s.toString();
  if (c.topology().world_size == 1) {
    const bool pending = master.waitFor([](const pccl::MasterStats& m) { return m.accepted >= 1 && m.pending >= 1; },
                                        30000);
    if (!pending) return who + "the other peer never asked to join";
    if (auto s = c.updateTopology(); !s.isOk()) return who + "updateTopology: " + s.toString();
  }
  if (c.topology().world_size != kPeers) return who + "world size " + std::to_string(c.topology().world_size);

  std::vector<double> data(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = seed * 0.5 * static_cast<double>(i + 1);
  pccl::ReduceOptions options;
  options.tag = 7;
  auto info = c.allReduce(data.data(), data.data(), kCount, pccl::DataType::kFloat64, pccl::RedOp::kSum, options);
  if (!info.isOk()) return who + "allReduce: " + info.status().toString();
  if (info->world_size != kPeers) return who + "all-reduce over " + std::to_string(info->world_size) + " peers";
  for (size_t i = 0; i < kCount; ++i) {
    const double want = 1.5 * static_cast<double>(i + 1);  // seeds 1 and 2
    if (data[i] != want) return who + "element " + std::to_string(i) + " is " + std::to_string(data[i]);
  }
  if (c.stats().allreduce_ops != 1) return who + "stats() counts " + std::to_string(c.stats().allreduce_ops);
  if (auto s = c.leave(); !s.isOk()) return who + "leave: " + s.toString();
  return "";
}

}  // namespace

int main() {
  int version = 0;
  if (pcclGetVersion(&version) != pcclSuccess || version != PCCL_VERSION_CODE) {
    std::fprintf(stderr, "consumer_cpp: libpccl is version %d, the header %d\n", version, PCCL_VERSION_CODE);
    return 1;
  }
  pccl::MasterConfig mc;
  mc.listen_address = "127.0.0.1:0";
  mc.secret = "consumer-secret";
  mc.heartbeat_interval_ms = 200;
  mc.peer_timeout_ms = 5000;
  auto master = pccl::Master::create(mc);
  if (!master.isOk()) {
    std::fprintf(stderr, "consumer_cpp: Master::create: %s\n", master.status().toString().c_str());
    return 1;
  }
  if (auto s = (*master)->start(); !s.isOk()) {
    std::fprintf(stderr, "consumer_cpp: Master::start: %s\n", s.toString().c_str());
    return 1;
  }
  const std::string address = "127.0.0.1:" + std::to_string((*master)->port());

  std::vector<std::string> errors(kPeers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kPeers; ++i) {
    threads.emplace_back([&, i] { errors[i] = runPeer(i + 1, **master, address); });
  }
  for (auto& t : threads) t.join();
  bool ok = true;
  for (const auto& e : errors) {
    if (!e.empty()) {
      std::fprintf(stderr, "consumer_cpp: %s\n", e.c_str());
      ok = false;
    }
  }
  if (auto s = (*master)->stop(); !s.isOk()) {
    std::fprintf(stderr, "consumer_cpp: Master::stop: %s\n", s.toString().c_str());
    ok = false;
  }
  if (!ok) return 1;
  std::printf("consumer ok (C++ API, libpccl %s, %d peers)\n", PCCL_VERSION_STRING, kPeers);
  return 0;
}
