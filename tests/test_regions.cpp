// The master's regions (master/regions.hpp): the threshold rule, the decision over declared regions and
// a synthetic link book, and Membership putting the decision into its TopologyUpdate (a survey answered
// with synthetic reports). No sockets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

#include "master/membership.hpp"
#include "master/regions.hpp"

using namespace pccl;
using master::decideRegions;
using master::LinkBook;
using master::RegionChoice;
using master::RegionMember;
using master::regionThreshold;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

wire::Uuid idOf(uint8_t tag) {
  wire::Uuid id{};
  id[0] = tag;
  id[15] = static_cast<uint8_t>(255 - tag);
  return id;
}

// Both directions of a pair, `rtt_ms` apart, usable at 100 MB/s.
void measure(LinkBook& book, uint8_t a, uint8_t b, double rtt_ms, uint64_t bandwidth = 100'000'000) {
  const auto rtt_us = static_cast<uint64_t>(rtt_ms * 1000.0);
  book.record(idOf(a), idOf(b), master::MeasuredLink{bandwidth, rtt_us});
  book.record(idOf(b), idOf(a), master::MeasuredLink{bandwidth, rtt_us});
}

// Members `tags` (in that order) with the declared regions of `declared` (missing: none).
std::vector<RegionMember> membersOf(const std::vector<uint8_t>& tags, const std::map<uint8_t, std::string>& declared = {}) {
  std::vector<RegionMember> out;
  for (uint8_t t : tags) {
    auto it = declared.find(t);
    out.push_back(RegionMember{idOf(t), it == declared.end() ? std::string() : it->second});
  }
  return out;
}

// Every pair of `all` measured: `near_ms` within a cluster (cluster[i] of tag i), else `far_ms(a, b)`.
void fullBook(LinkBook& book, const std::vector<uint8_t>& all, const std::function<int(uint8_t)>& cluster,
              double near_ms, const std::function<double(uint8_t, uint8_t)>& far_ms) {
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      const uint8_t a = all[i], b = all[j];
      measure(book, a, b, cluster(a) == cluster(b) ? near_ms + 0.01 * (a + b) : far_ms(a, b));
    }
  }
}

// The region each tag got.
std::map<uint8_t, std::string> byTag(const std::vector<uint8_t>& tags, const RegionChoice& c) {
  std::map<uint8_t, std::string> out;
  for (size_t i = 0; i < tags.size(); ++i) out[tags[i]] = c.regions[i];
  return out;
}

}  // namespace

TEST_CASE("regions: the near/far threshold sits in the widest gap of the measured round trips", "[regions]") {
  master::RegionRule rule;  // floor 5 ms, gap x4
  CHECK(regionThreshold({}, rule) == 0);
  // One LAN, whatever the jitter below the floor: all near.
  CHECK(regionThreshold({0.00003, 0.0002, 0.001, 0.004}, rule) == kInf);
  // LANs of three regions apart by 40..150 ms: near is at most the floor.
  CHECK(regionThreshold({0.0003, 0.150, 0.0008, 0.040, 0.090, 0.001}, rule) == Approx(0.005));
  // Metro regions (10..12 ms inside) 100 ms apart: the split is between 12 and 100 ms.
  CHECK(regionThreshold({0.010, 0.012, 0.100, 0.120, 0.011}, rule) == Approx(0.012));
  // Far links all alike (no gap of x4 among them): nobody is near anybody.
  CHECK(regionThreshold({0.040, 0.060, 0.090}, rule) == 0);
  // A smooth spread has no gap either, and is not one LAN.
  CHECK(regionThreshold({0.002, 0.007, 0.024, 0.090}, rule) == 0);
  // Of two gaps, the widest splits (single linkage at the coarsest level).
  CHECK(regionThreshold({0.001, 0.020, 0.200}, rule) == Approx(0.020));
  // The order of the input does not matter.
  std::vector<double> v = {0.090, 0.0003, 0.150, 0.001, 0.040, 0.0008};
  const double t = regionThreshold(v, rule);
  std::sort(v.begin(), v.end());
  CHECK(regionThreshold(v, rule) == t);
  // Another rule.
  master::RegionRule strict;
  strict.floor_s = 0.0001;
  strict.gap = 2.0;
  CHECK(regionThreshold({0.0003, 0.0009}, strict) == Approx(0.0003));
}

TEST_CASE("regions: declared regions are kept, undeclared peers without links share the unnamed region", "[regions]") {
  LinkBook book;
  const std::vector<uint8_t> tags = {1, 2, 3, 4, 5};
  const RegionChoice c = decideRegions(membersOf(tags, {{1, "eu-west"}, {2, "us-east"}, {4, "eu-west"}}), book);
  CHECK(c.regions == std::vector<std::string>{"eu-west", "us-east", "", "eu-west", ""});
  CHECK(c.detected == 0);
  CHECK(c.pairs == 0);
  CHECK(master::regionSummary(c.regions) == "eu-west (2), us-east (1), (unnamed) (2)");
  CHECK(master::regionSummary({}).empty());
  CHECK(master::regionSummary({"b", "a", "b"}) == "a (1), b (2)");
}

TEST_CASE("regions: three clusters of unequal size are found from the links and named by join order", "[regions]") {
  // 4 + 3 + 2 peers, joined interleaved; inside a cluster 0.2..0.4 ms, between clusters 35..80 ms.
  const std::map<uint8_t, int> cluster = {{1, 0}, {2, 1}, {3, 2}, {4, 0}, {5, 1}, {6, 2}, {7, 0}, {8, 1}, {9, 0}};
  const std::vector<uint8_t> join = {2, 1, 3, 4, 5, 6, 7, 8, 9};  // cluster 1's peer 2 joined first
  LinkBook book;
  fullBook(book, join, [&](uint8_t t) { return cluster.at(t); }, 0.2,
           [&](uint8_t a, uint8_t b) { return 35.0 + 15.0 * (cluster.at(a) + cluster.at(b)) + 0.1 * a; });
  const RegionChoice c = decideRegions(membersOf(join), book);
  const auto got = byTag(join, c);
  CHECK(c.detected == 9);
  CHECK(c.pairs == 36);
  CHECK(c.threshold_s == Approx(0.005));
  // Cluster 1 (peer 2 joined first) is auto-0, cluster 0 (peer 1) auto-1, cluster 2 (peer 3) auto-2.
  for (const auto& [tag, k] : cluster) {
    INFO("peer " << int(tag));
    CHECK(got.at(tag) == (k == 1 ? "auto-0" : k == 0 ? "auto-1" : "auto-2"));
  }
  CHECK(master::regionSummary(c.regions) == "auto-0 (3), auto-1 (4), auto-2 (2)");
  // Deterministic: the same inputs, the same answer; a book filled in another order, the same answer.
  CHECK(decideRegions(membersOf(join), book).regions == c.regions);
  LinkBook reversed;
  std::vector<uint8_t> back(join.rbegin(), join.rend());
  fullBook(reversed, back, [&](uint8_t t) { return cluster.at(t); }, 0.2,
           [&](uint8_t a, uint8_t b) { return 35.0 + 15.0 * (cluster.at(a) + cluster.at(b)) + 0.1 * a; });
  CHECK(decideRegions(membersOf(join), reversed).regions == c.regions);
}

TEST_CASE("regions: declared and detected together", "[regions]") {
  // Clusters: {1,2,3} (1 and 2 declared eu-west), {4,5} (none declared), {6,7,8,9} (6, 7 us-east; 8
  // us-west; 9 undeclared), {10, 11} (10 "zz", 11 "aa": a tie), {12} alone far from everyone.
  const std::map<uint8_t, int> cluster = {{1, 0}, {2, 0}, {3, 0},  {4, 1},  {5, 1},  {6, 2},
                                          {7, 2}, {8, 2}, {9, 2}, {10, 3}, {11, 3}, {12, 4}};
  std::vector<uint8_t> tags;
  for (const auto& kv : cluster) tags.push_back(kv.first);
  tags.push_back(13);  // joined after the survey: no links
  LinkBook book;
  std::vector<uint8_t> measured(tags.begin(), tags.end() - 1);
  fullBook(book, measured, [&](uint8_t t) { return cluster.at(t); }, 0.5, [](uint8_t a, uint8_t b) { return 60.0 + a + b; });
  const std::map<uint8_t, std::string> declared = {{1, "eu-west"}, {2, "eu-west"}, {6, "us-east"}, {7, "us-east"},
                                                   {8, "us-west"}, {10, "zz"},     {11, "aa"}};
  const RegionChoice c = decideRegions(membersOf(tags, declared), book);
  const auto got = byTag(tags, c);
  // Declared wins.
  for (const auto& [tag, region] : declared) CHECK(got.at(tag) == region);
  // An undeclared peer in a cluster with declared members takes its most common declared region.
  CHECK(got.at(3) == "eu-west");
  CHECK(got.at(9) == "us-east");
  // A cluster without declarations gets the first automatic name; a lone far peer the next.
  CHECK(got.at(4) == "auto-0");
  CHECK(got.at(5) == "auto-0");
  CHECK(got.at(12) == "auto-1");
  // A peer without measured links is in the unnamed region.
  CHECK(got.at(13) == "");
  CHECK(c.detected == 5);
}

TEST_CASE("regions: a tie between declared regions goes to the smallest name, and auto names skip declared ones", "[regions]") {
  LinkBook book;
  // {1 "zz", 2 "aa", 3 undeclared} near; {4, 5} undeclared near; {6 declared "auto-0"} far from all.
  for (auto [a, b] : std::vector<std::pair<uint8_t, uint8_t>>{{1, 2}, {1, 3}, {2, 3}, {4, 5}}) measure(book, a, b, 1.0);
  for (uint8_t a : {1, 2, 3}) {
    for (uint8_t b : {4, 5, 6}) measure(book, a, b, 80.0);
  }
  measure(book, 4, 6, 90.0);
  measure(book, 5, 6, 95.0);
  const std::vector<uint8_t> tags = {1, 2, 3, 4, 5, 6};
  const auto got = byTag(tags, decideRegions(membersOf(tags, {{1, "zz"}, {2, "aa"}, {6, "auto-0"}}), book));
  CHECK(got.at(3) == "aa");
  CHECK(got.at(4) == "auto-1");  // "auto-0" is taken by a declaration
  CHECK(got.at(5) == "auto-1");
  CHECK(got.at(6) == "auto-0");
}

TEST_CASE("regions: one-peer regions, unusable links, and everyone far or everyone near", "[regions]") {
  const std::vector<uint8_t> tags = {1, 2, 3};
  SECTION("all far and alike: every peer is its own region") {
    LinkBook book;
    measure(book, 1, 2, 70.0);
    measure(book, 1, 3, 90.0);
    measure(book, 2, 3, 110.0);
    CHECK(decideRegions(membersOf(tags), book).regions == std::vector<std::string>{"auto-0", "auto-1", "auto-2"});
  }
  SECTION("all on one LAN: one region") {
    LinkBook book;
    measure(book, 1, 2, 0.05);
    measure(book, 1, 3, 0.3);
    measure(book, 2, 3, 2.0);
    const RegionChoice c = decideRegions(membersOf(tags), book);
    CHECK(c.regions == std::vector<std::string>{"auto-0", "auto-0", "auto-0"});
    CHECK(c.threshold_s == kInf);
  }
  SECTION("single linkage: a chain of near links is one region") {
    LinkBook book;
    measure(book, 1, 2, 0.5);
    measure(book, 2, 3, 0.5);
    measure(book, 1, 3, 60.0);
    CHECK(decideRegions(membersOf(tags), book).regions == std::vector<std::string>{"auto-0", "auto-0", "auto-0"});
  }
  SECTION("a link that carried nothing is not a measurement; one usable direction is") {
    LinkBook book;
    measure(book, 1, 2, 0.5, 0);  // both directions unusable
    book.record(idOf(2), idOf(3), master::MeasuredLink{100'000'000, 400});
    book.record(idOf(3), idOf(2), master::MeasuredLink{0, 0});
    const RegionChoice c = decideRegions(membersOf(tags), book);
    CHECK(c.pairs == 1);
    CHECK(c.regions == std::vector<std::string>{"", "auto-0", "auto-0"});
  }
  SECTION("one member") {
    LinkBook book;
    CHECK(decideRegions(membersOf({7}), book).regions == std::vector<std::string>{""});
    CHECK(decideRegions(membersOf({7}, {{7, "solo"}}), book).regions == std::vector<std::string>{"solo"});
  }
}

// ---- Membership: the regions in its TopologyUpdate -------------------------------------------------

namespace {

wire::MemberInfo memberInfo(uint8_t tag, const std::string& region) {
  wire::MemberInfo m;
  m.id = idOf(tag);
  m.host = "10.0.0." + std::to_string(tag);
  m.port = static_cast<uint16_t>(1000 + tag);
  m.connections = 2;
  m.host_connections = 1;
  m.region = region;
  return m;
}

template <typename Msg>
std::vector<std::pair<wire::Uuid, Msg>> all(const master::Effects& fx) {
  std::vector<std::pair<wire::Uuid, Msg>> out;
  for (const auto& o : fx) {
    auto h = wire::decodeHeader(o.frame.data(), o.frame.size(), wire::kMaxControlPayload);
    REQUIRE(h.isOk());
    if (h->type != static_cast<uint16_t>(Msg::kType)) continue;
    auto m = wire::decodePayload<Msg>(o.frame.data() + wire::kHeaderSize, h->length);
    REQUIRE(m.isOk());
    out.emplace_back(o.to, *m);
  }
  return out;
}

// Every peer reports its ring connections up.
void allReady(master::Membership& m) {
  const auto ring = m.ring();
  for (const auto& r : ring) (void)m.p2pReady(r.id, m.epoch());
}

// Answers every ProbePlan of `fx` (and of the rounds after it) with links of `rtt_ms(from, to)`; returns
// the effects of the last report (the build).
master::Effects answerSurvey(master::Membership& m, master::Effects fx, const std::function<double(uint8_t, uint8_t)>& rtt_ms) {
  for (int round = 0; round < 64; ++round) {
    const auto plans = all<wire::ProbePlan>(fx);
    if (plans.empty()) return fx;
    master::Effects next;
    for (const auto& [to, plan] : plans) {
      wire::ProbeReport r;
      r.probe_id = plan.probe_id;
      if (plan.has_target) {
        r.target_id = plan.target.id;
        r.rtt_us = static_cast<uint64_t>(rtt_ms(to[0], plan.target.id[0]) * 1000.0);
        r.tx_bytes = 1 << 20;
      }
      if (plan.has_source) {
        r.source_id = plan.source.id;
        r.rx_bytes = 1 << 20;
        r.rx_rate = 100'000'000;
      }
      master::Effects out = m.probeReport(to, r);
      next.insert(next.end(), out.begin(), out.end());
    }
    fx = std::move(next);
  }
  FAIL("the survey did not end");
  return fx;
}

std::map<uint8_t, std::string> regionsIn(const wire::TopologyUpdate& u) {
  std::map<uint8_t, std::string> out;
  for (const auto& mi : u.ring) out[mi.id[0]] = mi.region;
  return out;
}

}  // namespace

TEST_CASE("regions: Membership sends declared regions in the ring, and regions detected by a survey", "[regions]") {
  master::Membership m;
  (void)m.join(memberInfo(1, "eu-west"));
  allReady(m);
  (void)m.join(memberInfo(2, ""));
  (void)m.join(memberInfo(3, "us-east"));
  (void)m.join(memberInfo(4, ""));
  (void)m.join(memberInfo(5, ""));
  // A plain update: no links, so the undeclared peers are in the unnamed region.
  auto updates = all<wire::TopologyUpdate>(m.vote(idOf(1)));
  REQUIRE(updates.size() == 5);  // the accepted peer voted: every pending peer is admitted, all hear of it
  CHECK(regionsIn(updates[0].second) ==
        std::map<uint8_t, std::string>{{1, "eu-west"}, {2, ""}, {3, "us-east"}, {4, ""}, {5, ""}});
  for (const auto& mi : m.ring()) CHECK(mi.region == regionsIn(updates[0].second).at(mi.id[0]));
  allReady(m);
  // An optimisation: 1 and 2 are near each other, 3 and 4 too, 5 is far from everyone.
  const std::map<uint8_t, int> cluster = {{1, 0}, {2, 0}, {3, 1}, {4, 1}, {5, 2}};
  master::Effects fx;
  for (uint8_t t = 1; t <= 5; ++t) fx = m.vote(idOf(t), true);
  fx = answerSurvey(m, fx, [&](uint8_t a, uint8_t b) { return cluster.at(a) == cluster.at(b) ? 0.3 : 70.0 + a + b; });
  updates = all<wire::TopologyUpdate>(fx);
  REQUIRE(updates.size() == 5);  // one per member, all the same
  for (const auto& [to, u] : updates) {
    CHECK(regionsIn(u) ==
          std::map<uint8_t, std::string>{{1, "eu-west"}, {2, "eu-west"}, {3, "us-east"}, {4, "us-east"}, {5, "auto-0"}});
  }
  allReady(m);
  // Peer 4 leaves: its links go, the others stay; 3 keeps its declaration, 2 its detected region.
  (void)m.remove(idOf(4), wire::LeaveReason::kGraceful, "");
  fx = {};
  for (uint8_t t : {1, 2, 3, 5}) fx = m.vote(idOf(t));
  updates = all<wire::TopologyUpdate>(fx);
  REQUIRE(updates.size() == 4);
  CHECK(regionsIn(updates[0].second) ==
        std::map<uint8_t, std::string>{{1, "eu-west"}, {2, "eu-west"}, {3, "us-east"}, {5, "auto-0"}});
}

TEST_CASE("regions: a run taken back goes on with the regions its members held", "[regions]") {
  master::Membership m;
  m.hold();
  wire::MemberInfo a = memberInfo(1, "eu-west"), b = memberInfo(2, "");
  (void)m.rejoin(a, 0);
  (void)m.rejoin(b, 1);
  wire::MemberInfo held_b = b;
  held_b.region = "auto-0";  // what its ring said (detected by the master before)
  (void)m.resume(7, {a, held_b}, "");
  REQUIRE(m.ring().size() == 2);
  CHECK(m.ring()[0].region == "eu-west");
  CHECK(m.ring()[1].region == "auto-0");
  // The next build decides again from the declarations: this master holds no links.
  master::Effects fx;
  for (uint8_t t : {1, 2}) fx = m.vote(idOf(t));
  auto updates = all<wire::TopologyUpdate>(fx);
  REQUIRE(updates.size() == 2);
  CHECK(regionsIn(updates[0].second) == std::map<uint8_t, std::string>{{1, "eu-west"}, {2, ""}});
}
