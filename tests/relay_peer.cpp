// relay_peer: one rank of tests/wanem_relay.sh inside a pccl-wanem rank namespace (issue 37, relayed
// ring links). Rank 0 runs the master only (so that killing a peer never kills it); the other ranks
// are peers, some behind firewalls (the paths file), so that some ring links run through a relay.
// Every peer joins and admits the others until the run has --world peers, then runs --ops float32 sum
// all-reduces of --count elements (rank r adds r), checking every element; a call that fails is
// reported ("rank R: op I failed: STATUS"), then the peer updates the topology (the master rebuilds
// the ring without a lost peer, with another relay) and runs that call again once. At the end it
// prints "rank R: done, W peers, F failed calls, relayed B bytes". --tamper 1|2 makes rank
// --tamper-rank a hostile relay (peer/relay.hpp's test hook: a flipped byte, a chunk sent twice), and
// every peer stop at its first failed call; --encrypt seals
// every connection (PCCL_SECRET is the run's secret). A peer that gets a call's failure twice in a row
// stops with exit status 1.
//   relay_peer --master HOST:PORT --world N [--ops N] [--count N] [--tamper M --tamper-rank R] [--encrypt]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "pccl/communicator.hpp"
#include "pccl/master.hpp"
#include "peer/relay.hpp"

namespace {

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string master;
  int world = 0, ops = 4, tamper = 0, tamper_rank = -1;
  size_t count = 1 << 20;
  bool encrypt = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--master") master = next, ++i;
    else if (a == "--world") world = std::atoi(next), ++i;
    else if (a == "--ops") ops = std::atoi(next), ++i;
    else if (a == "--count") count = std::strtoull(next, nullptr, 10), ++i;
    else if (a == "--tamper") tamper = std::atoi(next), ++i;
    else if (a == "--tamper-rank") tamper_rank = std::atoi(next), ++i;
    else if (a == "--encrypt") encrypt = true;
    else return std::fprintf(stderr, "relay_peer: unknown argument %s\n", a.c_str()), 2;
  }
  const int rank = std::atoi(env("PCCL_WANEM_RANK"));
  if (rank == 0) {  // the master, until the test stops the emulator
    pccl::MasterConfig mc;
    mc.listen_address = "0.0.0.0:" + master.substr(master.rfind(':') + 1);
    mc.secret = env("PCCL_SECRET");
    mc.encrypt = encrypt;
    mc.handshake_timeout_ms = 2000;
    mc.heartbeat_interval_ms = 200;
    mc.peer_timeout_ms = 2000;
    auto m = pccl::Master::create(mc);
    if (!m.isOk() || !(*m)->start().isOk()) return say("rank 0: master failed"), 2;
    say("rank 0: master up");
    // Until every peer joined and then left (or was lost).
    const bool all = (*m)->waitFor([world](const pccl::MasterStats& s) { return static_cast<int>(s.accepted) >= world; },
                                   120000);
    (*m)->waitFor([](const pccl::MasterStats& s) { return s.accepted == 0 && s.pending == 0; }, 180000);
    return all ? 0 : 1;
  }
  if (rank != tamper_rank) tamper = 0;
  pccl::peer::relayTamperForTest(tamper);
  pccl::CommConfig c;
  c.master_address = master;
  c.encrypt = encrypt;
  c.connections_per_peer = 4;
  c.heartbeat_interval_ms = 200;
  c.peer_timeout_ms = 2000;
  c.connect_timeout_ms = 60000;
  c.op_timeout_ms = 60000;
  c.master_reconnect_ms = 0;
  auto comm = pccl::Communicator::create(c);
  if (!comm.isOk()) return say("rank " + std::to_string(rank) + ": " + comm.status().toString()), 2;
  pccl::Communicator& cm = **comm;
  pccl::Status s = cm.connect();
  for (int tries = 0; s.code() == pccl::Code::kMasterUnreachable && tries < 100; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the master's rank may start later
    s = cm.connect();
  }
  if (!s.isOk()) return say("rank " + std::to_string(rank) + ": connect: " + s.toString()), 1;
  while (static_cast<int>(cm.topology().world_size) < world) {  // every member admits who waits
    auto pending = cm.arePeersPending();
    if (!pending.isOk()) return say("rank " + std::to_string(rank) + ": " + pending.status().toString()), 1;
    if (*pending) (void)cm.updateTopology();
  }
  say("rank " + std::to_string(rank) + ": joined, " + std::to_string(cm.topology().world_size) + " peers");
  int failed = 0;
  std::vector<float> x(count);
  for (int op = 0; op < ops; ++op) {
    for (int attempt = 0;; ++attempt) {
      const int size = static_cast<int>(cm.topology().world_size);
      for (float& v : x) v = static_cast<float>(rank);
      auto r = cm.allReduce(x.data(), x.data(), count, pccl::DataType::kFloat32, pccl::RedOp::kSum);
      if (r.isOk()) {
        // The sum of the wanem ranks of the ring's members: unknown here once one is lost, so each
        // element must equal the first (no element corrupted), and be at least this rank.
        bool same = true;
        for (float v : x) same = same && v == x[0];
        if (!same || x[0] < static_cast<float>(rank)) {
          return say("rank " + std::to_string(rank) + ": op " + std::to_string(op) + " WRONG result"), 1;
        }
        say("rank " + std::to_string(rank) + ": op " + std::to_string(op) + " ok, " + std::to_string(size) +
            " peers, sum " + std::to_string(static_cast<int>(x[0])));
        break;
      }
      ++failed;
      say("rank " + std::to_string(rank) + ": op " + std::to_string(op) + " failed: " + r.status().toString());
      if (attempt > 0 || tamper_rank >= 0) {
        return say("rank " + std::to_string(rank) + ": stopping"), 1;
      }
      pccl::Status u = cm.updateTopology();
      for (int tries = 0; !u.isOk() && tries < 20; ++tries) u = cm.updateTopology();
      if (!u.isOk()) return say("rank " + std::to_string(rank) + ": update: " + u.toString()), 1;
    }
  }
  say("rank " + std::to_string(rank) + ": done, " + std::to_string(cm.topology().world_size) + " peers, " +
      std::to_string(failed) + " failed calls, relayed " +
      std::to_string(cm.stats().relayed_bytes) + " bytes");
  (void)cm.barrier();
  return 0;
}
