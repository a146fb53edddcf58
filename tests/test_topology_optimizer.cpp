// Topology optimisation across real peers (docs/concepts.md, "Topology optimisation"): the link survey,
// the ring it installs, and what happens when peers die, freeze or call the wrong thing meanwhile. The
// scenario under pccl-wanem, where the optimiser must avoid a slow link, is tests/wanem_optimize.sh.
// The solver alone is test_ring_solver.cpp; the survey's bookkeeping is at the end of this file.
#include <catch2/catch.hpp>

#include <future>
#include <map>
#include <set>
#include <thread>

#include "master/link_survey.hpp"
#include "master/ring_order.hpp"
#include "peer/link_probe.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

// Short surveys: each link sends at most 4 MiB or for 300 ms.
MasterConfig surveyMaster() {
  MasterConfig m = fastMasterConfig();
  m.probe_budget_ms = 300;
  m.probe_bytes = 4 << 20;
  return m;
}

std::vector<Status> onAll(LocalCluster& c, const std::function<Status(Communicator&)>& fn) {
  std::vector<Status> st(c.peers.size());
  c.onEach([&](size_t i) { st[i] = fn(*c.peers[i]); });
  return st;
}

// Every peer all-reduces its rank + 1 (sum): each element must come back as n(n+1)/2.
void checkAllReduce(LocalCluster& c, uint64_t tag) {
  const size_t n = c.peers.size();
  std::vector<Status> st(n);
  std::vector<std::vector<float>> data(n, std::vector<float>(300000));
  c.onEach([&](size_t i) {
    std::fill(data[i].begin(), data[i].end(), static_cast<float>(i + 1));
    ReduceOptions o;
    o.tag = tag;
    auto r = c.peers[i]->allReduce(data[i].data(), data[i].data(), data[i].size(), DataType::kFloat32, RedOp::kSum, o);
    st[i] = r.status();
  });
  const float want = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < n; ++i) {
    REQUIRE(st[i].isOk());
    CHECK(std::count(data[i].begin(), data[i].end(), want) == static_cast<ptrdiff_t>(data[i].size()));
  }
}

std::string order(const Topology& t) {
  std::string s;
  for (const auto& m : t.ring) s += formatPeerId(m.id) + " ";
  return s;
}

}  // namespace

TEST_CASE("optimizeTopology measures every ordered pair and installs a ring every peer agrees on", "[optimize]") {
  LocalCluster c = startCluster(4, fastCommConfig(0), surveyMaster());
  REQUIRE(c.master);
  const uint64_t epoch = c.peers[0]->topology().epoch;
  checkAllReduce(c, 1);
  for (const Status& s : onAll(c, [](Communicator& p) { return p.optimizeTopology(); })) REQUIRE(s.isOk());
  const MasterStats ms = c.master->stats();
  CHECK(ms.topology_surveys == 1);
  CHECK(ms.links_measured == 12);
  CHECK(ms.links_known == 12);
  CHECK_FALSE(ms.measuring);
  CHECK(ms.predicted_bottleneck > 0);
  CHECK(ms.join_order_bottleneck > 0);
  CHECK(ms.predicted_bottleneck >= ms.join_order_bottleneck * 0.95);
  for (auto& p : c.peers) {
    CHECK(p->topology().epoch == epoch + 1);
    CHECK(order(p->topology()) == order(c.peers[0]->topology()));
    auto links = p->links();
    REQUIRE(links.isOk());
    REQUIRE(links->size() == 12);
    std::set<std::pair<uint32_t, uint32_t>> pairs;
    for (const LinkInfo& l : *links) {
      CHECK(l.bandwidth > 0);
      CHECK(l.rtt_s > 0);
      CHECK(l.rtt_s < 1.0);
      CHECK(l.from_rank != l.to_rank);
      CHECK(p->topology().ring[l.from_rank].id == l.from);
      pairs.emplace(l.from_rank, l.to_rank);
    }
    CHECK(pairs.size() == 12);
  }
  // All-reduces run on the new ring, and a second optimisation measures afresh.
  checkAllReduce(c, 2);
  for (const Status& s : onAll(c, [](Communicator& p) { return p.optimizeTopology(); })) REQUIRE(s.isOk());
  CHECK(c.master->stats().links_measured == 24);
  checkAllReduce(c, 3);
  // A plain update keeps a ring ordered by the links the master holds.
  for (const Status& s : onAll(c, [](Communicator& p) { return p.updateTopology(); })) REQUIRE(s.isOk());
  CHECK(c.master->stats().links_measured == 24);
  CHECK(c.master->stats().predicted_bottleneck > 0);
  checkAllReduce(c, 4);
}

TEST_CASE("all-reduces in flight around an optimisation are not corrupted", "[optimize]") {
  LocalCluster c = startCluster(3, fastCommConfig(0), surveyMaster());
  REQUIRE(c.master);
  // optimizeTopology refuses while this peer has a collective in flight ...
  std::vector<float> big(1 << 20, 1.0f);
  ReduceOptions o;
  o.tag = 7;
  auto h = c.peers[0]->allReduceAsync(big.data(), big.data(), big.size(), DataType::kFloat32, RedOp::kSum, o);
  REQUIRE(h.isOk());
  Status refused = c.peers[0]->optimizeTopology();
  CHECK(refused.code() == Code::kInvalidUsage);
  CHECK_THAT(refused.message(), Catch::Contains("in flight"));
  // ... the others complete the call, and the result is whole.
  std::vector<std::vector<float>> other(2, std::vector<float>(1 << 20, 1.0f));
  std::vector<std::future<Result<ReduceInfo>>> res;
  for (size_t i = 1; i <= 2; ++i) {
    res.push_back(std::async(std::launch::async, [&, i] {
      return c.peers[i]->allReduce(other[i - 1].data(), other[i - 1].data(), other[i - 1].size(), DataType::kFloat32,
                                   RedOp::kSum, o);
    }));
  }
  for (auto& f : res) REQUIRE(f.get().isOk());
  REQUIRE(h->wait().isOk());
  CHECK(std::count(big.begin(), big.end(), 3.0f) == static_cast<ptrdiff_t>(big.size()));
  for (int round = 0; round < 3; ++round) {
    checkAllReduce(c, 100 + round);
    for (const Status& s : onAll(c, [](Communicator& p) { return p.optimizeTopology(); })) REQUIRE(s.isOk());
  }
  checkAllReduce(c, 200);
}

TEST_CASE("mismatched topology calls (optimise against update) fail everyone clearly and a retry works",
          "[optimize]") {
  LocalCluster c = startCluster(3, fastCommConfig(0), surveyMaster());
  REQUIRE(c.master);
  std::vector<Status> st = onAll(c, [&](Communicator& p) {
    return &p == c.peers[2].get() ? p.updateTopology() : p.optimizeTopology();
  });
  for (const Status& s : st) {
    CHECK(s.code() == Code::kMismatch);
    CHECK_THAT(s.message(), Catch::Contains("pcclOptimizeTopology") && Catch::Contains("pcclUpdateTopology"));
  }
  CHECK(c.master->stats().topology_surveys == 0);
  for (const Status& s : onAll(c, [](Communicator& p) { return p.optimizeTopology(); })) REQUIRE(s.isOk());
  checkAllReduce(c, 1);
}

TEST_CASE("a peer joining is measured and admitted by optimizeTopology", "[optimize]") {
  LocalCluster c = startCluster(2, fastCommConfig(0), surveyMaster());
  REQUIRE(c.master);
  auto joiner = makeComm(fastCommConfig(c.master->port()));
  REQUIRE(joiner);
  auto joined = std::async(std::launch::async, [&] { return joiner->connect(); });
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 5000));
  for (const Status& s : onAll(c, [](Communicator& p) { return p.optimizeTopology(); })) REQUIRE(s.isOk());
  REQUIRE(joined.get().isOk());
  CHECK(c.master->stats().links_measured == 6);
  c.peers.push_back(std::move(joiner));
  for (auto& p : c.peers) CHECK(p->topology().world_size == 3);
  checkAllReduce(c, 1);
}

TEST_CASE("automatic mode measures only a joiner's links", "[optimize]") {
  MasterConfig mc = surveyMaster();
  mc.auto_optimize = 1;
  LocalCluster c = startCluster(3, fastCommConfig(0), mc);
  REQUIRE(c.master);
  // The first update with three members measured all six links (nothing was known).
  CHECK(c.master->stats().links_measured == 6);
  auto joiner = makeComm(fastCommConfig(c.master->port()));
  REQUIRE(joiner);
  auto joined = std::async(std::launch::async, [&] { return joiner->connect(); });
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 5000));
  REQUIRE(c.updateAll());
  REQUIRE(joined.get().isOk());
  const MasterStats ms = c.master->stats();
  CHECK(ms.links_measured == 12);  // 6 before, and the joiner's 3 out and 3 in
  CHECK(ms.links_known == 12);
  CHECK(ms.predicted_bottleneck > 0);
  c.peers.push_back(std::move(joiner));
  checkAllReduce(c, 1);
  // A departure needs no measurement: the remaining links are known.
  c.peers.pop_back();
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.accepted == 3; }, 5000));
  REQUIRE(c.updateAll());
  CHECK(c.master->stats().links_measured == 12);
  CHECK(c.master->stats().links_known == 6);
  checkAllReduce(c, 2);
}

TEST_CASE("an encrypted run measures over sealed probe connections", "[optimize]") {
  MasterConfig mc = surveyMaster();
  mc.secret = "probe-secret";
  mc.encrypt = true;
  CommConfig cc = fastCommConfig(0, "probe-secret");
  cc.encrypt = true;
  LocalCluster c = startCluster(3, cc, mc);
  REQUIRE(c.master);
  for (const Status& s : onAll(c, [](Communicator& p) { return p.optimizeTopology(); })) REQUIRE(s.isOk());
  CHECK(c.master->stats().links_measured == 6);
  auto links = c.peers[1]->links();
  REQUIRE(links.isOk());
  REQUIRE(links->size() == 6);
  for (const LinkInfo& l : *links) CHECK(l.bandwidth > 0);
  checkAllReduce(c, 1);
}

TEST_CASE("peer groups: each group's links are measured and each gets its own ring", "[optimize]") {
  std::vector<CommConfig> configs;
  for (uint32_t g : {0u, 1u, 0u, 1u, 0u}) {
    CommConfig cc = fastCommConfig(0);
    cc.peer_group = g;
    configs.push_back(cc);
  }
  LocalCluster c = startCluster(configs, surveyMaster());
  REQUIRE(c.master);
  for (const Status& s : onAll(c, [](Communicator& p) { return p.optimizeTopology(); })) REQUIRE(s.isOk());
  CHECK(c.master->stats().links_measured == 3 * 2 + 2 * 1);  // within groups only
  for (auto& p : c.peers) {
    const Topology t = p->topology();
    CHECK(t.world_size == 5);
    CHECK(t.group_world_size == (p->topology().ring[t.rank].group == 0 ? 3u : 2u));
  }
  // Each group all-reduces within itself: group 0 sums 1 + 1 + 1, group 1 sums 1 + 1.
  std::vector<std::vector<float>> data(5, std::vector<float>(1000, 1.0f));
  std::vector<Status> st(5);
  c.onEach([&](size_t i) {
    st[i] = c.peers[i]->allReduce(data[i].data(), data[i].data(), data[i].size(), DataType::kFloat32, RedOp::kSum)
                .status();
  });
  for (size_t i = 0; i < 5; ++i) {
    REQUIRE(st[i].isOk());
    CHECK(data[i][0] == (configs[i].peer_group == 0 ? 3.0f : 2.0f));
  }
}

TEST_CASE("master config: probe settings and PCCL_AUTO_OPTIMIZE are validated", "[optimize]") {
  MasterConfig m = fastMasterConfig();
  m.probe_budget_ms = 0;
  CHECK(Master::create(m).status().code() == Code::kInvalidArgument);
  m = fastMasterConfig();
  m.probe_bytes = 0;
  CHECK(Master::create(m).status().code() == Code::kInvalidArgument);
  m = fastMasterConfig();
  m.auto_optimize = 2;
  CHECK(Master::create(m).status().code() == Code::kInvalidArgument);
  setenv("PCCL_AUTO_OPTIMIZE", "yes", 1);
  m.auto_optimize = -1;
  auto bad = Master::create(m);
  unsetenv("PCCL_AUTO_OPTIMIZE");
  CHECK(bad.status().code() == Code::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("PCCL_AUTO_OPTIMIZE"));
}

// ---- real processes: a peer killed or frozen while the links are measured ----------------------------

namespace {

struct SurveyRing {
  std::unique_ptr<Master> master;
  std::vector<std::unique_ptr<Communicator>> members;
  std::unique_ptr<ChildProcess> victim;  // a ring_member process that calls pcclOptimizeTopology
};

// Two in-process members and a ring_member process. The survey lasts a while (each link sends for 2 s)
// so that the test can act during it.
SurveyRing surveyRing() {
  SurveyRing r;
  MasterConfig mc = fastMasterConfig();
  mc.probe_budget_ms = 2000;
  mc.probe_bytes = 1ull << 40;
  r.master = startMaster(mc);
  REQUIRE(r.master);
  auto cfg = fastCommConfig(r.master->port());
  for (int i = 0; i < 2; ++i) r.members.push_back(makeComm(cfg));
  REQUIRE(r.members[0]->connect().isOk());
  auto second = std::async(std::launch::async, [&] { return r.members[1]->connect(); });
  std::vector<std::string> args = memberArgs(r.master->port(), "victim");
  args.insert(args.end(), {"--optimize", "1"});
  r.victim = std::make_unique<ChildProcess>(args, std::vector<std::string>{"PCCL_LOG_LEVEL=error"});
  REQUIRE(r.master->waitFor([](const MasterStats& s) { return s.pending == 2; }, 5000));
  REQUIRE(r.members[0]->updateTopology().isOk());
  REQUIRE(second.get().isOk());
  REQUIRE(r.victim->waitForLine("victim connected", 5000));
  return r;
}

std::vector<Status> optimizeMembers(SurveyRing& r) {
  auto a = std::async(std::launch::async, [&] { return r.members[0]->optimizeTopology(); });
  Status b = r.members[1]->optimizeTopology();
  return {a.get(), b};
}

void checkPair(SurveyRing& r) {
  std::vector<std::vector<float>> data(2, std::vector<float>(100000, 1.0f));
  auto a = std::async(std::launch::async, [&] {
    return r.members[0]->allReduce(data[0].data(), data[0].data(), data[0].size(), DataType::kFloat32, RedOp::kSum);
  });
  auto b = r.members[1]->allReduce(data[1].data(), data[1].data(), data[1].size(), DataType::kFloat32, RedOp::kSum);
  REQUIRE(a.get().isOk());
  REQUIRE(b.isOk());
  for (const auto& d : data) CHECK(std::count(d.begin(), d.end(), 2.0f) == static_cast<ptrdiff_t>(d.size()));
}

}  // namespace

TEST_CASE("a peer SIGKILLed during the link survey: survivors get PeerLost, nothing installed, a retry works",
          "[optimize][faults]") {
  SurveyRing r = surveyRing();
  const uint64_t epoch = r.members[0]->topology().epoch;
  auto calls = std::async(std::launch::async, [&] { return optimizeMembers(r); });
  REQUIRE(r.master->waitFor([](const MasterStats& s) { return s.measuring; }, 10000));
  r.victim->signal(SIGKILL);
  for (const Status& s : calls.get()) {
    CHECK(s.code() == Code::kPeerLost);
    CHECK_THAT(s.message(), Catch::Contains("measured"));
  }
  for (auto& m : r.members) CHECK(m->topology().epoch == epoch);  // nothing half-installed
  CHECK(r.master->stats().topology_surveys == 0);
  for (const Status& s : optimizeMembers(r)) REQUIRE(s.isOk());
  for (auto& m : r.members) CHECK(m->topology().world_size == 2);
  CHECK(r.master->stats().topology_surveys == 1);
  checkPair(r);
}

TEST_CASE("a peer frozen (SIGSTOP) during the link survey: survivors get PeerLost, a retry works",
          "[optimize][faults]") {
  SurveyRing r = surveyRing();
  auto calls = std::async(std::launch::async, [&] { return optimizeMembers(r); });
  REQUIRE(r.master->waitFor([](const MasterStats& s) { return s.measuring; }, 10000));
  REQUIRE(r.victim->freeze());
  for (const Status& s : calls.get()) CHECK(s.code() == Code::kPeerLost);
  CHECK(r.master->stats().accepted == 2);
  for (const Status& s : optimizeMembers(r)) REQUIRE(s.isOk());
  checkPair(r);
}

// ---- the survey's bookkeeping (pure) ----------------------------------------------------------------

TEST_CASE("scheduleRounds: no peer sends or receives twice in a round, every pair once", "[optimize]") {
  for (size_t n : {2, 3, 5, 8}) {
    std::vector<master::ProbePair> all;
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) {
        if (a != b) all.emplace_back(a, b);
      }
    }
    auto rounds = master::scheduleRounds(all, n);
    CHECK(rounds.size() == n - 1);  // optimal: each peer sends n-1 times
    std::set<master::ProbePair> seen;
    for (const auto& round : rounds) {
      std::set<size_t> tx, rx;
      for (const auto& p : round) {
        CHECK(tx.insert(p.first).second);
        CHECK(rx.insert(p.second).second);
        CHECK(seen.insert(p).second);
      }
    }
    CHECK(seen.size() == all.size());
  }
  // A joiner's links: 2(n-1) pairs, it sends and receives in every round.
  std::vector<master::ProbePair> joiner;
  for (size_t i = 0; i < 5; ++i) {
    joiner.emplace_back(5, i);
    joiner.emplace_back(i, 5);
  }
  auto rounds = master::scheduleRounds(joiner, 6);
  CHECK(rounds.size() == 5);
}

TEST_CASE("steadyRate reads the second half of a transfer, past a slow start", "[optimize]") {
  using peer::steadyRate;
  const TimePoint t0 = Clock::now();
  std::vector<std::pair<TimePoint, uint64_t>> s;
  uint64_t bytes = 0;
  // 100 ms at 10 MB/s, then 100 ms at 100 MB/s, sampled every ms.
  for (int ms = 1; ms <= 200; ++ms) {
    bytes += ms <= 100 ? 10000 : 100000;
    s.emplace_back(t0 + std::chrono::milliseconds(ms), bytes);
  }
  const double rate = static_cast<double>(steadyRate(s, t0));
  CHECK(rate == Approx(100e6).epsilon(0.02));
  CHECK(steadyRate({}, t0) == 0);
  // Too short to split: the average since the start.
  std::vector<std::pair<TimePoint, uint64_t>> one{{t0 + std::chrono::milliseconds(10), 1000000}};
  CHECK(static_cast<double>(steadyRate(one, t0)) == Approx(100e6).epsilon(0.01));
}

TEST_CASE("orderRing: measured groups get the best ring, others keep the previous order", "[optimize]") {
  auto member = [](uint8_t id, uint32_t group) {
    wire::MemberInfo m;
    m.id[0] = id;
    m.group = group;
    m.host = "10.0.0." + std::to_string(id);
    return m;
  };
  std::vector<wire::MemberInfo> joined{member(1, 0), member(2, 0), member(3, 0), member(4, 0), member(5, 1),
                                       member(6, 1)};
  master::LinkBook book;
  // Group 0: every link 100 MB/s except 2 -> 3 (the join order's), which is 1 MB/s.
  for (size_t a = 0; a < 4; ++a) {
    for (size_t b = 0; b < 4; ++b) {
      if (a == b) continue;
      const bool slow = a == 1 && b == 2;
      book.record(joined[a].id, joined[b].id, master::MeasuredLink{slow ? 1000000u : 100000000u, 1000});
    }
  }
  master::RingOrder o = master::orderRing(joined, {}, book);
  REQUIRE(o.ring.size() == 6);
  CHECK(o.measured);
  CHECK(o.bottleneck == 0);  // group 1 was not measured: the prediction is unknown
  master::RingOrder only0 = master::orderRing({joined.begin(), joined.begin() + 4}, {}, book);
  CHECK(only0.bottleneck == Approx(100e6));
  CHECK(only0.join_bottleneck == Approx(1e6));
  for (size_t i = 0; i + 1 < 4; ++i) CHECK_FALSE((o.ring[i].id[0] == 2 && o.ring[i + 1].id[0] == 3));
  CHECK(o.ring[4].id[0] == 5);
  CHECK(o.ring[5].id[0] == 6);
  // Which links a survey measures: all within groups, or only the missing ones (not for pairs).
  CHECK(master::linksToMeasure(joined, book, true).size() == 12 + 2);
  CHECK(master::linksToMeasure(joined, book, false).empty());
  book.forget(joined[3].id);
  CHECK(book.size() == 6);
  CHECK(master::linksToMeasure(joined, book, false).size() == 6);
  // Without links: the previous order, newcomers last.
  master::LinkBook none;
  std::vector<wire::MemberInfo> previous{member(3, 0), member(1, 0)};
  o = master::orderRing(joined, previous, none);
  CHECK_FALSE(o.measured);
  CHECK(o.ring[0].id[0] == 3);
  CHECK(o.ring[1].id[0] == 1);
  CHECK(o.ring[2].id[0] == 2);
  CHECK(o.ring[3].id[0] == 4);
}

namespace {

// Plays the peers of a LinkSurvey: decodes each round's plans and answers them, the link `broken`
// failing (no round trip, nothing received) the first `breaks` times it is measured. Returns the rounds
// played; *measured counts how often each pair was planned.
size_t playSurvey(const std::vector<wire::MemberInfo>& members, master::ProbePair broken, int breaks,
                  master::LinkBook* book, std::map<master::ProbePair, int>* measured) {
  master::LinkSurvey survey;
  std::vector<master::ProbePair> all;
  for (size_t a = 0; a < members.size(); ++a) {
    for (size_t b = 0; b < members.size(); ++b) {
      if (a != b) all.emplace_back(a, b);
    }
  }
  const auto index = [&](const wire::Uuid& id) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i].id == id) return i;
    }
    FAIL("a plan for a peer that is not a member");
    return size_t{0};
  };
  master::Effects fx = survey.begin(members, all, master::SurveyConfig{}, Clock::now());
  size_t rounds = 0;
  bool finished = false;
  while (!finished) {
    REQUIRE_FALSE(fx.empty());
    ++rounds;
    std::vector<std::pair<wire::Uuid, wire::ProbeReport>> reports;
    for (const master::Outgoing& out : fx) {
      auto plan = wire::decodePayload<wire::ProbePlan>(out.frame.data() + wire::kHeaderSize,
                                                       out.frame.size() - wire::kHeaderSize);
      INFO(plan.status().toString());
      REQUIRE(plan.isOk());
      wire::ProbeReport r;
      r.probe_id = plan->probe_id;
      const size_t self = index(out.to);
      if (plan->has_target) {
        const master::ProbePair p{self, index(plan->target.id)};
        ++(*measured)[p];
        const bool fails = p == broken && (*measured)[p] <= breaks;
        r.target_id = plan->target.id;
        r.rtt_us = fails ? 0 : 1000;
        if (fails) r.detail = "connection reset by peer";
      }
      if (plan->has_source) {
        const master::ProbePair p{index(plan->source.id), self};
        // The plans come in member order and `broken` runs from a lower index to a higher one: its
        // sender was counted in this round already, and both sides of it agree.
        const bool fails = p == broken && (*measured)[p] <= breaks;
        r.source_id = plan->source.id;
        r.rx_rate = fails ? 0 : 50000000;
      }
      reports.emplace_back(out.to, r);
    }
    fx.clear();
    for (const auto& [id, r] : reports) {
      master::Effects next = survey.report(id, r, book, Clock::now(), &finished);
      fx.insert(fx.end(), next.begin(), next.end());
    }
    REQUIRE(rounds < 10);
  }
  CHECK(survey.rounds() == rounds);
  return rounds;
}

}  // namespace

TEST_CASE("a link survey measures a link again that a fault broke, once", "[optimize]") {
  std::vector<wire::MemberInfo> members(4);
  for (size_t i = 0; i < members.size(); ++i) {
    members[i].id[0] = static_cast<uint8_t>(i + 1);
    members[i].host = "10.0.0." + std::to_string(i + 1);
    members[i].port = 4000;
    members[i].connections = members[i].host_connections = 4;
  }
  const master::ProbePair broken{0, 1};  // from a lower index to a higher one (playSurvey)
  SECTION("the link works the second time: it is usable, after one more round") {
    master::LinkBook book;
    std::map<master::ProbePair, int> measured;
    CHECK(playSurvey(members, broken, 1, &book, &measured) == 3 + 1);
    CHECK(measured[broken] == 2);
    for (const auto& [pair, n] : measured) {
      if (pair != broken) CHECK(n == 1);
    }
    REQUIRE(book.find(members[0].id, members[1].id) != nullptr);
    CHECK(book.find(members[0].id, members[1].id)->bandwidth == 50000000);
    CHECK(book.size() == 12);
  }
  SECTION("it fails again: recorded unusable, and not measured a third time") {
    master::LinkBook book;
    std::map<master::ProbePair, int> measured;
    CHECK(playSurvey(members, broken, 2, &book, &measured) == 3 + 1);
    CHECK(measured[broken] == 2);
    REQUIRE(book.find(members[0].id, members[1].id) != nullptr);
    CHECK(book.find(members[0].id, members[1].id)->bandwidth == 0);
    CHECK(book.find(members[1].id, members[0].id)->bandwidth == 50000000);
  }
  SECTION("nothing breaks: the planned rounds only") {
    master::LinkBook book;
    std::map<master::ProbePair, int> measured;
    CHECK(playSurvey(members, broken, 0, &book, &measured) == 3);
    CHECK(measured.size() == 12);
  }
}
