// The peers' commit round and what happens when it is cut short (docs/algorithms.md §2): a peer that
// dies or freezes after its data is in, a peer whose deadline passes while the others commit, calls
// that time out and are retried, and neighbours that see different calls. Real processes where a peer
// is killed (commit_peer); test hooks drop chosen commit-round messages. Every case checks the same
// thing: the surviving peers see one outcome, never a split, and a failed call leaves its input intact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <future>
#include <thread>

#include "api/comm_impl.hpp"
#include "test_support.hpp"
#include "wire/data.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

constexpr size_t kCount = 1 << 16;  // 256 KiB of float32: within the eager limit, so a withheld hello holds nothing up

std::vector<std::string> commitPeerArgs(uint16_t port) {
  return {PCCL_COMMIT_PEER_BIN, "--master", "127.0.0.1:" + std::to_string(port), "--count", std::to_string(kCount)};
}

// Three peers in this process and a commit_peer process that drops its commit-round messages.
struct Scene {
  LocalCluster cluster;
  std::unique_ptr<ChildProcess> victim;
};

// `path`: the algorithm the all-reduce of kCount takes (the victim gets it through PCCL_GATHER_BYTES).
Scene sceneWithVictim(Path path, const CommConfig& base = fastCommConfig(0),
                      const MasterConfig& master = fastMasterConfig()) {
  INFO(pathName(path));
  Scene s;
  const CommConfig config = onPath(base, path);
  s.cluster = startCluster(3, config, master);
  REQUIRE(s.cluster.peers.size() == 3);
  s.victim = std::make_unique<ChildProcess>(
      commitPeerArgs(s.cluster.master->port()),
      std::vector<std::string>{"PCCL_LOG_LEVEL=error", "PCCL_GATHER_BYTES=" + std::to_string(config.gather_bytes)});
  // The victim is a fresh process: on a busy 2-core machine its start and join took over 10 s once (a
  // build beside ctest -j2), so these deadlines are generous; each returns as soon as the event happens.
  REQUIRE(s.cluster.master->waitFor([](const MasterStats& st) { return st.pending == 1; }, 30000));
  REQUIRE(s.cluster.updateAll());
  REQUIRE(s.victim->waitForLine("connected", 30000));
  return s;
}

struct Outcome {
  Status status;
  std::vector<float> buf;
};

// Every in-process peer runs one in-place all-reduce of ones.
std::vector<std::future<Outcome>> reduceOnEach(LocalCluster& c) {
  std::vector<std::future<Outcome>> out;
  for (auto& p : c.peers) {
    Communicator* comm = p.get();
    out.push_back(std::async(std::launch::async, [comm] {
      Outcome o;
      o.buf.assign(kCount, 1.0f);
      o.status = comm->allReduce(o.buf.data(), o.buf.data(), kCount, DataType::kFloat32, RedOp::kSum).status();
      return o;
    }));
  }
  return out;
}

// Counts the in-process peers that became prepared (their first "prepared" message of the round), so a
// test can strike when every survivor holds its data and none can have committed.
struct PreparedWatch {
  std::mutex mu;
  std::condition_variable cv;
  size_t prepared = 0;
  void watch(LocalCluster& c) {
    for (auto& p : c.peers) {
      auto said = std::make_shared<std::atomic<bool>>(false);
      detail::CommAccess::impl(*p).setRingCtlHookForTest([this, said](uint64_t, uint8_t kind) {
        if (kind == wire::RingCtl::kPrepared && !said->exchange(true)) {
          std::lock_guard<std::mutex> lk(mu);
          ++prepared;
          cv.notify_all();
        }
        return true;
      });
    }
  }
  bool waitFor(size_t n, int timeout_ms) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return prepared >= n; });
  }
};

bool all(const std::vector<float>& v, float x) {
  return std::all_of(v.begin(), v.end(), [x](float y) { return y == x; });
}

// Every peer starts its all-reduce; returns once all of them, the victim too, hold their data (none can
// commit: the victim drops its commit-round messages).
std::vector<std::future<Outcome>> reduceUntilAllPrepared(Scene& s) {
  PreparedWatch watch;
  watch.watch(s.cluster);
  auto futures = reduceOnEach(s.cluster);
  const bool prepared = s.victim->waitForLine("prepared", 20000).has_value();
  if (!prepared) {
    for (const auto& l : s.victim->lines()) WARN("victim: " << l);
  }
  REQUIRE(prepared);
  REQUIRE(watch.waitFor(3, 20000));
  for (auto& p : s.cluster.peers) detail::CommAccess::impl(*p).setRingCtlHookForTest(nullptr);
  return futures;
}

// The survivors form a new ring without the victim and all-reduce with it.
void goesOnWithThree(LocalCluster& c) {
  REQUIRE(c.updateAll());
  auto again = reduceOnEach(c);
  for (auto& f : again) {
    Outcome o = f.get();
    CHECK(o.status.isOk());
    CHECK(all(o.buf, 3.0f));
  }
}

}  // namespace

TEST_CASE("commit: a peer SIGKILLed after its data is in, before it told anyone: every survivor succeeds",
          "[commit][faults]") {
  const Path path = GENERATE(Path::kRing, Path::kGather);
  INFO(pathName(path));
  Scene s = sceneWithVictim(path);
  // Every survivor holds all its data but none can commit: the victim's streak never reaches them.
  auto futures = reduceUntilAllPrepared(s);
  s.victim->signal(SIGKILL);
  for (size_t i = 0; i < futures.size(); ++i) {
    Outcome o = futures[i].get();
    INFO("peer " << i << ": " << o.status.toString());
    CHECK(o.status.isOk());
    CHECK(all(o.buf, 4.0f));  // the victim's contribution is in: it was sent before it died
  }
  // The run goes on without it.
  goesOnWithThree(s.cluster);
}

TEST_CASE("commit: a peer SIGKILLed while a survivor is not yet prepared: every survivor fails, input intact",
          "[commit][faults]") {
  const Path path = GENERATE(Path::kRing, Path::kGather);
  INFO(pathName(path));
  Scene s = sceneWithVictim(path);
  // One survivor withholds its hello: its predecessor (another survivor) holds its data but is never
  // prepared, as if that hello were slow to arrive.
  const Topology t = s.cluster.peers[0]->topology();
  size_t held = s.cluster.peers.size();
  for (size_t i = 0; i < s.cluster.peers.size() && held == s.cluster.peers.size(); ++i) {
    const uint32_t r = s.cluster.peers[i]->topology().group_rank;
    const PeerId pred = t.ring[(r + t.ring.size() - 1) % t.ring.size()].id;
    for (const auto& p : s.cluster.peers) {
      if (p->id() == pred) held = i;
    }
  }
  REQUIRE(held < s.cluster.peers.size());
  detail::CommAccess::impl(*s.cluster.peers[held]).setRingCtlHookForTest([](uint64_t, uint8_t kind) {
    return kind != wire::RingCtl::kHello;
  });
  auto futures = reduceOnEach(s.cluster);
  REQUIRE(s.victim->waitForLine("prepared", 20000));
  s.victim->signal(SIGKILL);
  for (size_t i = 0; i < futures.size(); ++i) {
    Outcome o = futures[i].get();
    INFO("peer " << i << ": " << o.status.toString());
    CHECK(o.status.code() == Code::kPeerLost);
    CHECK(all(o.buf, 1.0f));
  }
  detail::CommAccess::impl(*s.cluster.peers[held]).setRingCtlHookForTest(nullptr);
  goesOnWithThree(s.cluster);
}

TEST_CASE("commit: a peer frozen (SIGSTOP) in the commit round is removed and every survivor succeeds",
          "[commit][faults]") {
  const Path path = GENERATE(Path::kRing, Path::kGather);
  INFO(pathName(path));
  Scene s = sceneWithVictim(path);
  auto futures = reduceUntilAllPrepared(s);
  s.victim->signal(SIGSTOP);  // its sockets stay open: only the master's heartbeat timeout notices
  for (size_t i = 0; i < futures.size(); ++i) {
    Outcome o = futures[i].get();
    INFO("peer " << i << ": " << o.status.toString());
    CHECK(o.status.isOk());
    CHECK(all(o.buf, 4.0f));
  }
  s.victim->signal(SIGCONT);
  // Woken, it was removed from the run: it either fails its call (it hears that first) or reads the
  // commit its neighbours sent before it froze, and then holds the same result as everyone.
  auto line = s.victim->waitForLine("result", 10000);
  REQUIRE(line);
  INFO(*line);
  CHECK((line->find("result ok 4") != std::string::npos || line->find("Kicked") != std::string::npos ||
         line->find("MasterUnreachable") != std::string::npos));
  s.victim->waitExit(10000);
}

TEST_CASE("commit: peers in doubt that the master never answers end with Timeout, input intact", "[commit][faults]") {
  // The victim freezes in the commit round, and the master holds it (its peer timeout is long): it
  // asks the victim how the call ended and never hears back. Every wait in doubt has a deadline: the
  // call's, at least 10 s after it fell in doubt (docs/protocol.md §8.7).
  CommConfig config = fastCommConfig(0);
  config.op_timeout_ms = 3000;
  MasterConfig master = fastMasterConfig();
  master.peer_timeout_ms = 120000;
  Scene s = sceneWithVictim(Path::kRing, config, master);
  // Nobody's commit round gets anywhere (every "prepared" and "commit" is dropped), so nobody commits:
  // all of them hold their data until their deadlines, then ask the master.
  auto watch = std::make_shared<PreparedWatch>();  // the hooks may outlive this scope
  for (auto& p : s.cluster.peers) {
    auto said = std::make_shared<std::atomic<bool>>(false);
    detail::CommAccess::impl(*p).setRingCtlHookForTest([watch, said](uint64_t, uint8_t kind) {
      if (kind == wire::RingCtl::kPrepared && !said->exchange(true)) {
        std::lock_guard<std::mutex> lk(watch->mu);
        ++watch->prepared;
        watch->cv.notify_all();
      }
      return kind != wire::RingCtl::kPrepared && kind != wire::RingCtl::kCommit;
    });
  }
  auto futures = reduceOnEach(s.cluster);
  REQUIRE(s.victim->waitForLine("prepared", 20000));
  REQUIRE(watch->waitFor(3, 20000));
  s.victim->signal(SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < futures.size(); ++i) {
    REQUIRE(futures[i].wait_for(std::chrono::seconds(40)) == std::future_status::ready);
    Outcome o = futures[i].get();
    INFO("peer " << i << ": " << o.status.toString());
    CHECK(o.status.code() == Code::kTimeout);
    CHECK_THAT(o.status.message(), Catch::Contains("in doubt") && Catch::Contains("may have committed"));
    CHECK(all(o.buf, 1.0f));  // the input, restored
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  for (auto& p : s.cluster.peers) detail::CommAccess::impl(*p).setRingCtlHookForTest(nullptr);
  s.victim->signal(SIGCONT);
}

TEST_CASE("commit: a deadline that passes while the others commit does not roll this peer back", "[commit]") {
  // Protocol 3's hole: a peer that had finished locally restored its input when its deadline passed
  // while OpComplete was on its way, though the others kept the result.
  CommConfig slow = fastCommConfig(0);
  CommConfig quick = fastCommConfig(0);
  quick.op_timeout_ms = 3000;
  LocalCluster c = startCluster({slow, quick});
  REQUIRE(c.peers.size() == 2);
  // Peer 0 commits (it hears peer 1's prepared) but nothing of its commit round reaches peer 1, whose
  // deadline passes while it holds the result.
  detail::CommAccess::impl(*c.peers[0]).setRingCtlHookForTest([](uint64_t, uint8_t kind) {
    return kind != wire::RingCtl::kCommit && kind != wire::RingCtl::kPrepared;
  });
  auto futures = reduceOnEach(c);
  for (size_t i = 0; i < 2; ++i) {
    Outcome o = futures[i].get();
    INFO("peer " << i << ": " << o.status.toString());
    CHECK(o.status.isOk());
    CHECK(all(o.buf, 2.0f));
  }
}

TEST_CASE("commit: a call that timed out alone is retried under the same tag and pairs with the others' calls",
          "[commit]") {
  // Protocol 3's hole: the master's OpStart for the withdrawn call could start the retry's buffer
  // under the old operation. Now the withdrawn call has its own number and its data is discarded.
  CommConfig normal = fastCommConfig(0);
  CommConfig quick = fastCommConfig(0);
  quick.op_timeout_ms = 500;
  LocalCluster c = startCluster({quick, normal});
  REQUIRE(c.peers.size() == 2);
  std::vector<float> stale(kCount, 100.0f);
  auto first = c.peers[0]->allReduce(stale.data(), stale.data(), kCount, DataType::kFloat32, RedOp::kSum);
  REQUIRE_FALSE(first.isOk());
  CHECK(first.status().code() == Code::kTimeout);
  CHECK(all(stale, 100.0f));
  // Both now call with ones; a trainer retries what fails. Whatever the order of events, no success
  // may include the stale 100s, and both end with 2.
  std::vector<Outcome> out(2);
  c.onEach([&](size_t i) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      out[i].buf.assign(kCount, 1.0f);
      out[i].status = c.peers[i]->allReduce(out[i].buf.data(), out[i].buf.data(), kCount, DataType::kFloat32,
                                            RedOp::kSum).status();
      if (out[i].status.isOk()) return;
      if (out[i].status.code() == Code::kPeerLost) (void)c.peers[i]->updateTopology();
    }
  });
  for (size_t i = 0; i < 2; ++i) {
    INFO("peer " << i << ": " << out[i].status.toString());
    CHECK(out[i].status.isOk());
    CHECK(all(out[i].buf, 2.0f));
  }
}

TEST_CASE("commit: neighbours that see a different call fail it everywhere with Mismatch, for every field",
          "[commit][agreement]") {
  struct Variant {
    const char* field;
    const char* says;
  };
  const Variant variants[] = {{"quant", "quant=int8"}, {"compress", "compress=3"}, {"segment_bytes", "segment_bytes=4096"}};
  for (const Variant& v : variants) {
    SECTION(std::string("peer 1 differs in ") + v.field) {
      std::vector<CommConfig> configs(3, fastCommConfig(0));
      if (std::string(v.field) == "segment_bytes") configs[1].segment_bytes = 4096;
      LocalCluster c = startCluster(configs);
      REQUIRE(c.peers.size() == 3);
      std::vector<Status> st(3);
      std::vector<std::vector<float>> bufs(3, std::vector<float>(kCount, 1.0f));
      c.onEach([&](size_t rank) {
        ReduceOptions o;
        if (rank == 1 && std::string(v.field) == "quant") o.quant = Quant::kInt8;
        if (rank == 1 && std::string(v.field) == "compress") o.compress = 3;
        st[rank] = c.peers[rank]->allReduce(bufs[rank].data(), bufs[rank].data(), kCount, DataType::kFloat32,
                                            RedOp::kSum, o).status();
      });
      for (size_t r = 0; r < 3; ++r) {
        INFO("rank " << r << ": " << st[r].toString());
        CHECK(st[r].code() == Code::kMismatch);
        CHECK(st[r].message().find(v.says) != std::string::npos);
        CHECK(all(bufs[r], 1.0f));
      }
      if (std::string(v.field) != "segment_bytes") {
        // The ring is still up: the same tag works at once.
        c.onEach([&](size_t rank) {
          st[rank] = c.peers[rank]->allReduce(bufs[rank].data(), bufs[rank].data(), kCount, DataType::kFloat32,
                                              RedOp::kSum).status();
        });
        for (size_t r = 0; r < 3; ++r) {
          CHECK(st[r].isOk());
          CHECK(all(bufs[r], 3.0f));
        }
      }
    }
  }
}

TEST_CASE("commit: large concurrent calls started in different orders, one peer blocking in the other tag",
          "[commit][agreement]") {
  // Peer 0 starts tag 1 then tag 2 without waiting; peer 1 runs tag 2 to completion before it calls tag
  // 1. Peer 0's eager bytes of tag 1 wait at peer 1; the rest waits at peer 0 for peer 1's hello, so
  // tag 2 is never stuck behind it.
  LocalCluster c = startCluster(2, fastCommConfig(0));
  REQUIRE(c.peers.size() == 2);
  constexpr size_t kBig = 4 << 20;  // 16 MiB of float32: beyond the 4 MiB eager limit
  std::vector<std::vector<float>> one(2, std::vector<float>(kBig, 1.0f)), two(2, std::vector<float>(kBig, 2.0f));
  ReduceOptions t1, t2;
  t1.tag = 1;
  t2.tag = 2;
  std::vector<Status> s1(2), s2(2);
  c.onEach([&](size_t i) {
    Communicator& p = *c.peers[i];
    if (i == 0) {
      auto a = p.allReduceAsync(one[0].data(), one[0].data(), kBig, DataType::kFloat32, RedOp::kSum, t1);
      auto b = p.allReduceAsync(two[0].data(), two[0].data(), kBig, DataType::kFloat32, RedOp::kSum, t2);
      s1[0] = a.isOk() ? a->wait().status() : a.status();
      s2[0] = b.isOk() ? b->wait().status() : b.status();
    } else {
      s2[1] = p.allReduce(two[1].data(), two[1].data(), kBig, DataType::kFloat32, RedOp::kSum, t2).status();
      s1[1] = p.allReduce(one[1].data(), one[1].data(), kBig, DataType::kFloat32, RedOp::kSum, t1).status();
    }
  });
  for (size_t i = 0; i < 2; ++i) {
    INFO("peer " << i << ": " << s1[i].toString() << " / " << s2[i].toString());
    CHECK(s1[i].isOk());
    CHECK(s2[i].isOk());
    CHECK(all(one[i], 2.0f));
    CHECK(all(two[i], 4.0f));
  }
}
