// Collectives under real failures of real processes: a ring_member process is SIGKILLed or SIGSTOPped
// while the in-process survivors are inside all-reduces (or broadcasts, all-gathers, reduce-scatters)
// with it; the master is killed mid-operation.
// Survivors must fail with PeerLost (or MasterUnreachable) within the heartbeat timeout, find their
// in-place input intact, and succeed again after pcclUpdateTopology with the smaller world.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <mutex>
#include <cstring>

#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

constexpr size_t kCount = 1 << 22;  // 16 MiB of float32: an operation takes long enough to be hit
// Elements per rank of a `kind` operation: an all-gather's or reduce-scatter's layout is 4 x that
// (about as much as the all-reduce's at 3 peers).
// "allreduce-small": 1000 elements, which gather (in two levels in a two-level group).
// Under a sanitizer an all-gather's or reduce-scatter's layout is 4 MiB: the two-level reduce-scatter
// copies and reduces its layout three times over on the io threads of three in-process survivors beside
// the in-process master, and at 16 MiB under TSan that once starved the master's heartbeats past the
// 1 s timeout before the first call ended (a strike between two calls is caught by the next one).
size_t perRank(const std::string& kind) {
  if (kind == "allreduce-small") return 1000;
  if (kind == "allgather" || kind == "reducescatter") return kSanitized ? kCount / 16 : kCount / 4;
  return kCount;
}
// ring_member's --collective for `kind` (the victim's loop prints it).
std::string memberKind(const std::string& kind) { return kind == "allreduce-small" ? "allreduce" : kind; }
constexpr uint32_t kSegment = 64 << 10;

CommConfig faultConfig(uint16_t port) {
  CommConfig c = fastCommConfig(port);
  c.segment_bytes = kSegment;
  c.op_timeout_ms = 30000;
  // The in-process peers' watchdog on the master's heartbeats: patient. What these tests time is the
  // master noticing a frozen or killed victim (its own peer_timeout_ms); under TSan with two CPU hogs
  // beside it, the master's heartbeats to a survivor once came 2.5 s apart and the survivor left
  // before the strike (docs/testing.md).
  c.peer_timeout_ms = 4 * kTimeoutMs;
  return c;
}

// What a survivor saw: the status that ended its loop, when, and whether its input was intact.
struct Outcome {
  Status status;
  std::chrono::steady_clock::time_point at;
  bool input_intact = false;
  size_t successes = 0;
  bool hierarchical = false;  // its successes ran in two levels (docs/algorithms.md §12)
  bool gathered = false;      // and gathered (a small call, §1 and §12a)
};

// Counts successful operations across threads, so a test can wait for "N done" without polling.
struct Progress {
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  void add() {
    std::lock_guard<std::mutex> lk(mu);
    ++done;
    cv.notify_all();
  }
  bool waitFor(size_t n, int timeout_ms) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return done >= n; });
  }
};

// One in-place float32 collective of kCount elements (per rank) as ring_member --collective runs it
// (examples/c/ring_member.c, runCollective): *intact tells whether a failure left the input as it was,
// and *right whether a success is the expected result.
Result<ReduceInfo> runOnce(Communicator& c, const std::string& kind, std::vector<float>& buf, const ReduceOptions& opts,
                           bool* intact, bool* right) {
  const size_t n = perRank(kind);
  const uint32_t rank = c.topology().group_rank;
  const uint32_t world = std::max<uint32_t>(c.topology().group_world_size, 1);
  auto all = [](const float* p, size_t len, float v) { return std::all_of(p, p + len, [v](float x) { return x == v; }); };
  if (kind == "broadcast") {
    const float mine = rank == 0 ? 1.0f : static_cast<float>(rank + 2);
    buf.assign(n, mine);
    auto r = c.broadcast(buf.data(), buf.data(), n, DataType::kFloat32, 0, opts);
    *intact = all(buf.data(), n, mine);
    *right = r.isOk() && all(buf.data(), n, 1.0f);
    return r;
  }
  if (kind == "allgather") {
    buf.assign(n * world, 0.0f);
    float* own = buf.data() + rank * n;
    std::fill(own, own + n, static_cast<float>(rank + 1));
    auto r = c.allGather(own, buf.data(), n, DataType::kFloat32, opts);
    *intact = all(own, n, static_cast<float>(rank + 1));
    *right = r.isOk();
    for (uint32_t b = 0; b < world && *right; ++b) *right = all(buf.data() + b * n, n, b + 1.0f);
    return r;
  }
  if (kind == "reducescatter") {
    buf.assign(n * world, 1.0f);
    float* own = buf.data() + rank * n;
    auto r = c.reduceScatter(buf.data(), own, n, DataType::kFloat32, RedOp::kSum, opts);
    *intact = all(buf.data(), buf.size(), 1.0f);
    *right = r.isOk() && all(own, n, static_cast<float>(r->world_size));
    return r;
  }
  buf.assign(n, 1.0f);
  auto r = c.allReduce(buf.data(), buf.data(), n, DataType::kFloat32, RedOp::kSum, opts);
  *intact = all(buf.data(), n, 1.0f);
  *right = r.isOk() && all(buf.data(), n, static_cast<float>(r->world_size));
  return r;
}

// That collective in a loop until one fails.
Outcome reduceUntilFailure(Communicator& c, Progress* progress = nullptr, ReduceOptions opts = {},
                           const std::string& kind = "allreduce") {
  Outcome o;
  std::vector<float> buf;
  for (;;) {
    bool intact = false, right = false;
    auto r = runOnce(c, kind, buf, opts, &intact, &right);
    if (!r.isOk()) {
      o.status = r.status();
      o.at = std::chrono::steady_clock::now();
      o.input_intact = intact;
      return o;
    }
    ++o.successes;
    o.hierarchical = r->hierarchical;
    o.gathered = r->gathered;
    if (progress != nullptr) progress->add();
    if (!right) {
      o.status = Status::internal("wrong result");
      return o;
    }
  }
}

struct Scene {
  std::unique_ptr<Master> master;
  std::vector<std::unique_ptr<Communicator>> survivors;
  std::unique_ptr<ChildProcess> victim;
};

// Regions for a two-level scene (docs/algorithms.md §12): each survivor's, then the victim's; every
// peer asks for two levels. Empty: a flat ring of two survivors and the victim.
struct Regions {
  std::vector<std::string> survivors;
  std::string victim;
};

// In-process peers (two, or one per region of `regions`) and one ring_member process looping
// all-reduces (or `kind`) with them.
Scene sceneWithVictim(const std::string& kind = "allreduce", const Regions& regions = {}) {
  Scene s;
  s.master = startMaster(fastMasterConfig());
  REQUIRE(s.master);
  const size_t n = regions.survivors.empty() ? 2 : regions.survivors.size();
  for (size_t i = 0; i < n; ++i) {
    auto cfg = faultConfig(s.master->port());
    if (!regions.survivors.empty()) {
      cfg.region = regions.survivors[i];
      cfg.algorithm = "hierarchical";
    }
    s.survivors.push_back(makeComm(cfg));
  }
  REQUIRE(s.survivors[0]->connect().isOk());
  std::vector<std::future<Status>> joins;
  for (size_t i = 1; i < n; ++i) joins.push_back(std::async(std::launch::async, [&, i] { return s.survivors[i]->connect(); }));
  std::vector<std::string> args = memberArgs(s.master->port(), "victim");
  args.insert(args.end(),
              {"--allreduce", std::to_string(perRank(kind)), "--segment-bytes", "65536", "--collective", memberKind(kind)});
  std::vector<std::string> env = {"PCCL_LOG_LEVEL=error"};
  if (!regions.survivors.empty()) env.insert(env.end(), {"PCCL_REGION=" + regions.victim, "PCCL_ALGORITHM=hierarchical"});
  s.victim = std::make_unique<ChildProcess>(args, env);
  // Deadlines, not speeds: a sanitizer-built child process on a loaded machine can take seconds to start.
  REQUIRE(s.master->waitFor([n](const MasterStats& st) { return st.pending == n; }, 20000));
  REQUIRE(s.survivors[0]->updateTopology().isOk());
  for (auto& j : joins) REQUIRE(j.get().isOk());
  REQUIRE(s.victim->waitForLine("victim connected", 20000));
  if (!regions.survivors.empty()) REQUIRE(s.survivors[0]->topology().hierarchical);
  return s;
}

// Waits for the victim's third completed operation, then for half the time one operation took: the
// next operation is then under way on every peer (a fixed point to strike at, not a polling loop).
// False when the third operation never came.
bool waitUntilMidOperation(ChildProcess& victim, const std::string& kind) {
  auto line = victim.waitForLine("victim " + memberKind(kind) + " 3 ok", 20000);
  if (!line) return false;
  const double op_ms = std::stod(line->substr(line->find("time_ms=") + 8));
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(op_ms * 500)));
  return true;
}

void retryWithSmallerWorld(Scene& s, const std::string& kind) {
  const size_t n = s.survivors.size();
  std::vector<Status> st(n);
  std::vector<std::thread> t;
  for (size_t i = 0; i < n; ++i) {
    t.emplace_back([&, i] {
      st[i] = s.survivors[i]->updateTopology();
      if (!st[i].isOk()) return;
      std::vector<float> buf;
      bool intact = false, right = false;
      auto r = runOnce(*s.survivors[i], kind, buf, ReduceOptions{}, &intact, &right);
      st[i] = r.status();
      if (r.isOk() && r->world_size != n) st[i] = Status::internal("world size is not the survivors'");
      if (r.isOk() && !right) st[i] = Status::internal("wrong result after the retry");
    });
  }
  for (auto& th : t) th.join();
  for (size_t i = 0; i < n; ++i) {
    INFO(st[i].toString());
    CHECK(st[i].isOk());
  }
}

}  // namespace

namespace {
// A bound on noticing a killed peer, for a loaded machine under a sanitizer; the cause is checked too.
constexpr double kKilledLimitS = kTimeoutMs / 1000.0 + 1.5;

// Survivors loop all-reduces with the victim; `sig` strikes it mid-operation. Every survivor must fail
// with PeerLost within `limit_s`, its input intact, and succeed after an update with world 2. A killed
// peer's sockets break at once: that is what must end the call, not the heartbeat timeout (the cause
// in the message says which; a time limit alone would measure the machine's load).
void strikeMidOperation(Scene& s, int sig, double limit_s, ReduceOptions opts = {},
                        const std::string& kind = "allreduce") {
  const size_t n = s.survivors.size();
  std::vector<Outcome> out(n);
  std::vector<std::thread> loops;
  for (size_t i = 0; i < n; ++i) {
    loops.emplace_back([&, i] { out[i] = reduceUntilFailure(*s.survivors[i], nullptr, opts, kind); });
  }
  if (!waitUntilMidOperation(*s.victim, kind)) {
    s.victim->signal(SIGKILL);  // the survivors' loops end, then the case fails cleanly
    for (auto& t : loops) t.join();
    std::string survivors;
    for (size_t i = 0; i < n; ++i) survivors += "; survivor " + std::to_string(i) + ": " + out[i].status.toString();
    FAIL("the victim never finished its third operation" << survivors);
  }
  const auto struck = std::chrono::steady_clock::now();
  s.victim->signal(sig);
  for (auto& t : loops) t.join();
  const bool two_level = s.survivors[0]->topology().hierarchical;
  const bool small = kind == "allreduce-small";
  for (size_t i = 0; i < n; ++i) {
    INFO("survivor " << i << ": " << out[i].status.toString());
    CHECK(out[i].status.code() == Code::kPeerLost);
    CHECK(out[i].input_intact);
    CHECK(out[i].successes >= 3);
    CHECK(out[i].hierarchical == two_level);
    CHECK(out[i].gathered == small);
    const double after = std::chrono::duration<double>(out[i].at - struck).count();
    WARN("survivor " << i << " saw PeerLost " << after * 1000 << " ms after " << strsignal(sig) << ": "
                     << out[i].status.message());
    CHECK(after < limit_s);
    if (sig == SIGKILL) CHECK_THAT(out[i].status.message(), !Catch::Contains("heartbeat"));
  }
  retryWithSmallerWorld(s, kind);
}
}  // namespace

TEST_CASE("allreduce faults: a peer SIGKILLed mid-operation -> PeerLost at once, input intact, retry succeeds",
          "[faults][allreduce]") {
  Scene s = sceneWithVictim();
  std::vector<CommStats> before;
  for (auto& c : s.survivors) before.push_back(c->stats());
  strikeMidOperation(s, SIGKILL, kKilledLimitS);  // the broken socket, not the heartbeat timeout
  // The counters saw it as a trainer did: one aborted operation, retried once (same tag) successfully
  // in a new ring, and only successful operations set the throughput.
  for (size_t i = 0; i < 2; ++i) {
    const CommStats st = s.survivors[i]->stats();
    CHECK(st.allreduce_aborts == before[i].allreduce_aborts + 1);
    CHECK(st.allreduce_retries == before[i].allreduce_retries + 1);
    CHECK(st.allreduce_ops >= before[i].allreduce_ops + 4);  // >= 3 before the strike, and the retry
    CHECK(st.topology_updates == before[i].topology_updates + 1);
    CHECK(st.epoch == s.survivors[i]->topology().epoch);
    CHECK(st.tx_bytes > before[i].tx_bytes);
    CHECK(st.last_allreduce_bytes_per_second > 0);
  }
}

TEST_CASE("allreduce faults: SIGKILL mid-operation with device buffers (GPU ABI on the CPU) -> PeerLost, restored",
          "[faults][allreduce][device]") {
  // The survivors pass device buffers through libpccl-gpu-host.so (see test_device_allreduce.cpp):
  // the failure must drop their queued device jobs, wait for a running one, and restore the
  // in-place buffer from its device copy. The victim uses host memory: a mixed ring.
  REQUIRE(setenv("PCCL_GPU_BACKEND", PCCL_GPU_HOST_BACKEND, 1) == 0);
  Scene s = sceneWithVictim();
  ReduceOptions device;
  device.location = BufferLocation::kDevice;
  strikeMidOperation(s, SIGKILL, kKilledLimitS, device);
}

namespace {
// As the all-reduce above: the survivors' device jobs are dropped or waited for, and each in-place
// buffer (a broadcast receiver's, an all-gather's block, a reduce-scatter's input) comes back from its
// device copy.
void strikeDeviceCollective(const std::string& kind) {
  REQUIRE(setenv("PCCL_GPU_BACKEND", PCCL_GPU_HOST_BACKEND, 1) == 0);
  Scene s = sceneWithVictim(kind);
  ReduceOptions device;
  device.location = BufferLocation::kDevice;
  strikeMidOperation(s, SIGKILL, kKilledLimitS, device, kind);
}
}  // namespace

TEST_CASE("collective faults: SIGKILL mid-broadcast with device buffers (GPU ABI on the CPU) -> PeerLost, "
          "receivers' buffers restored, retry succeeds",
          "[faults][collectives][device]") {
  strikeDeviceCollective("broadcast");
}

TEST_CASE("collective faults: SIGKILL mid-allgather with device buffers (GPU ABI on the CPU) -> PeerLost, "
          "in-place block intact, retry succeeds",
          "[faults][collectives][device]") {
  strikeDeviceCollective("allgather");
}

TEST_CASE("collective faults: SIGKILL mid-reducescatter with device buffers (GPU ABI on the CPU) -> PeerLost, "
          "input restored, retry succeeds",
          "[faults][collectives][device]") {
  strikeDeviceCollective("reducescatter");
}

TEST_CASE("collective faults: a peer SIGKILLed mid-broadcast -> PeerLost, in-place buffers intact, retry succeeds",
          "[faults][collectives]") {
  Scene s = sceneWithVictim("broadcast");
  strikeMidOperation(s, SIGKILL, kKilledLimitS, {}, "broadcast");
}

TEST_CASE("collective faults: a peer SIGKILLed mid-allgather -> PeerLost, in-place block intact, retry succeeds",
          "[faults][collectives]") {
  Scene s = sceneWithVictim("allgather");
  strikeMidOperation(s, SIGKILL, kKilledLimitS, {}, "allgather");
}

TEST_CASE("collective faults: a peer SIGKILLed mid-reducescatter -> PeerLost, input intact, retry succeeds",
          "[faults][collectives]") {
  Scene s = sceneWithVictim("reducescatter");
  strikeMidOperation(s, SIGKILL, kKilledLimitS, {}, "reducescatter");
}

TEST_CASE("collective faults: a peer SIGSTOPped mid-allgather -> PeerLost within the heartbeat timeout",
          "[faults][collectives]") {
  Scene s = sceneWithVictim("allgather");
  strikeMidOperation(s, SIGSTOP, silenceLimitS() + 1.5, {}, "allgather");
  s.victim->signal(SIGCONT);
  CHECK(s.victim->waitExit(10000) != 0);
}

TEST_CASE("allreduce faults: a peer SIGSTOPped mid-operation -> PeerLost within the heartbeat timeout",
          "[faults][allreduce]") {
  Scene s = sceneWithVictim();
  strikeMidOperation(s, SIGSTOP, silenceLimitS() + 1.5);
  s.victim->signal(SIGCONT);
  CHECK(s.victim->waitExit(10000) != 0);  // it learns it was removed
}

// Two levels (docs/algorithms.md §12): the victim alone in its region takes part in the WAN level only
// (every piece's ring); beside a survivor in its region it is on the LAN level too.
TEST_CASE("two-level faults: a peer alone in its region SIGKILLed mid-operation (WAN level) -> PeerLost on "
          "every survivor, input intact, the retry in two levels exact",
          "[faults][allreduce][two-level]") {
  Scene s = sceneWithVictim("allreduce", Regions{{"a", "a", "b", "b"}, "c"});
  strikeMidOperation(s, SIGKILL, kKilledLimitS);
}

TEST_CASE("two-level faults: a peer sharing its region SIGKILLed mid-operation (LAN and WAN level) -> PeerLost, "
          "input intact, retry exact",
          "[faults][allreduce][two-level]") {
  Scene s = sceneWithVictim("allreduce", Regions{{"a", "b", "a"}, "b"});
  strikeMidOperation(s, SIGKILL, kKilledLimitS);
}

TEST_CASE("two-level faults: small all-reduces (gathered in two levels), a region leader SIGKILLed -> PeerLost "
          "on every survivor, input intact, retry exact",
          "[faults][allreduce][two-level]") {
  // The victim is region b's first member in ring order or not, as the ring falls: either way it is in
  // the region's gather and broadcast, and as b's leader in the gather between regions too.
  Scene s = sceneWithVictim("allreduce-small", Regions{{"a", "b", "a"}, "b"});
  strikeMidOperation(s, SIGKILL, kKilledLimitS, {}, "allreduce-small");
}

TEST_CASE("two-level faults: a peer SIGKILLed mid-broadcast (LAN and WAN level) -> PeerLost, in-place buffers "
          "intact, retry exact",
          "[faults][collectives][two-level]") {
  Scene s = sceneWithVictim("broadcast", Regions{{"a", "b", "a"}, "b"});
  strikeMidOperation(s, SIGKILL, kKilledLimitS, {}, "broadcast");
}

TEST_CASE("two-level faults: a peer SIGKILLed mid-reducescatter (LAN and WAN level) -> PeerLost, input intact, "
          "retry exact",
          "[faults][collectives][two-level]") {
  Scene s = sceneWithVictim("reducescatter", Regions{{"a", "b", "a"}, "b"});
  strikeMidOperation(s, SIGKILL, kKilledLimitS, {}, "reducescatter");
}

TEST_CASE("two-level faults: a peer SIGSTOPped mid-operation -> PeerLost within the heartbeat timeout",
          "[faults][allreduce][two-level]") {
  Scene s = sceneWithVictim("allreduce", Regions{{"a", "b", "a"}, "b"});
  strikeMidOperation(s, SIGSTOP, silenceLimitS() + 1.5);
  s.victim->signal(SIGCONT);
  CHECK(s.victim->waitExit(10000) != 0);
}

TEST_CASE("allreduce faults: the master killed mid-operation -> MasterUnreachable on every peer, input intact",
          "[faults][allreduce]") {
  ChildProcess master({PCCL_MASTER_BIN, "--listen", "127.0.0.1:0", "--heartbeat-ms", "100", "--peer-timeout-ms", "1000"},
                      {"PCCL_LOG_LEVEL=info"}, /*merge_stderr=*/true);
  auto line = master.waitForLine("listening on", 5000);
  REQUIRE(line);
  const uint16_t port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  std::vector<std::unique_ptr<Communicator>> peers;
  for (int i = 0; i < 2; ++i) peers.push_back(makeComm(faultConfig(port)));
  REQUIRE(peers[0]->connect().isOk());
  auto joining = std::async(std::launch::async, [&] { return peers[1]->connect(); });
  REQUIRE(master.waitForLine("admitted", 5000));             // peer 0, alone
  REQUIRE(master.waitForLine("pending admission", 5000));    // peer 1 (the master's log line)
  REQUIRE(peers[0]->updateTopology().isOk());
  REQUIRE(joining.get().isOk());
  std::vector<Outcome> out(2);
  Progress progress;
  std::vector<std::thread> loops;
  for (size_t i = 0; i < 2; ++i) loops.emplace_back([&, i] { out[i] = reduceUntilFailure(*peers[i], &progress); });
  // Let a few operations go through on both peers; the next one is then under way when it strikes.
  REQUIRE(progress.waitFor(6, 20000));
  const auto killed = std::chrono::steady_clock::now();
  master.signal(SIGKILL);
  for (auto& t : loops) t.join();
  for (size_t i = 0; i < 2; ++i) {
    INFO("peer " << i << ": " << out[i].status.toString());
    // A peer whose call failed with MasterUnreachable closes the ring; its neighbour may have been between
    // two calls then, and its next one finds the ring down (PeerLost, "call pcclUpdateTopology"), or in a
    // call that the closed ring ends (PeerLost, "ring connection lost": seen on a loaded machine): what
    // the update says then is that the master is gone.
    if (out[i].status.code() == Code::kPeerLost) {
      CHECK_THAT(out[i].status.message(),
                 Catch::Contains("ring's connections are down") || Catch::Contains("ring connection lost"));
      CHECK(peers[i]->updateTopology().code() == Code::kMasterUnreachable);
    } else {
      CHECK(out[i].status.code() == Code::kMasterUnreachable);
    }
    CHECK(out[i].input_intact);
    CHECK(std::chrono::duration<double>(out[i].at - killed).count() < kTimeoutMs / 1000.0 + 1.0);
  }
}
