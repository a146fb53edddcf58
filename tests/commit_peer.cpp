// commit_peer: a peer process of the commit-round tests (test_commit.cpp). Joins, runs one in-place
// float32 sum all-reduce of ones, and never tells its neighbours that it holds its data: its
// "prepared" and "commit" messages are dropped (a test hook), as if it died right after its last data
// frame. When it would have sent its first one it prints "prepared" (flushed), so the test can kill
// or freeze it at exactly that point: a "prepared" streak, or, when it is the last peer to hold its
// data and already heard every other peer's streak, straight away a "commit" (it then ends its call
// and leaves: the others, who never hear it, settle with the master). Then it prints
// "result <status> <first element>".
//
//   commit_peer --master HOST:PORT --count N
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/comm_impl.hpp"
#include "pccl/communicator.hpp"
#include "wire/data.hpp"

int main(int argc, char** argv) {
  std::string master;
  size_t count = 1 << 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--master") == 0) master = argv[i + 1];
    if (std::strcmp(argv[i], "--count") == 0) count = std::strtoull(argv[i + 1], nullptr, 10);
  }
  pccl::CommConfig c;
  c.master_address = master;
  c.listen_address = "127.0.0.1:0";
  c.connections_per_peer = 2;
  c.same_host_connections = 0;
  c.heartbeat_interval_ms = 100;
  c.peer_timeout_ms = 1000;
  c.connect_timeout_ms = 10000;
  c.op_timeout_ms = 60000;
  auto comm = pccl::Communicator::create(c);
  if (!comm.isOk()) return 2;
  pccl::detail::CommAccess::impl(**comm).setRingCtlHookForTest([](uint64_t, uint8_t kind) {
    static bool said = false;
    const bool round = kind == pccl::wire::RingCtl::kPrepared || kind == pccl::wire::RingCtl::kCommit;
    if (round && !said) {
      said = true;
      std::printf("prepared\n");
      std::fflush(stdout);
    }
    return !round;
  });
  if (!(*comm)->connect().isOk()) return 3;
  std::printf("connected\n");
  std::fflush(stdout);
  std::vector<float> buf(count, 1.0f);
  auto r = (*comm)->allReduce(buf.data(), buf.data(), count, pccl::DataType::kFloat32, pccl::RedOp::kSum);
  std::printf("result %s %g\n", r.isOk() ? "ok" : r.status().toString().c_str(), static_cast<double>(buf[0]));
  std::fflush(stdout);
  return r.isOk() ? 0 : 1;
}
