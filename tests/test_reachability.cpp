// Members that cannot be dialled (issue 37, docs/concepts.md "Reachability"), on the pure layers: who
// opens each link (wire::opensLink, peer::planRing, the link survey's plans), where the master places
// such members in a ring (orderRing, the solver's matrix, withheld()), which links it measures, the
// levels it decides, which holders a shared-state receiver fetches from, and the membership that
// keeps a member pending while no ring could hold it. No sockets: the emulator test
// (tests/wanem_firewall.sh) runs the same over real firewalls and NATs.
#include <catch2/catch.hpp>

#include <algorithm>

#include "master/levels.hpp"
#include "master/link_survey.hpp"
#include "master/membership.hpp"
#include "master/relays.hpp"
#include "master/ring_order.hpp"
#include "master/sync_election.hpp"
#include "peer/relay.hpp"
#include "peer/ring_pool.hpp"
#include "wire/frame.hpp"

using namespace pccl;

namespace {

wire::MemberInfo member(uint8_t tag, bool inbound, std::string host = {}) {
  wire::MemberInfo m;
  m.id[0] = tag;
  m.host = host.empty() ? "10.0.0." + std::to_string(tag) : std::move(host);
  m.port = static_cast<uint16_t>(1000 + tag);
  m.connections = 2;
  m.inbound = inbound ? 1 : 0;
  return m;
}

// The ring `ring` puts two members that cannot link side by side (wrapping around).
bool adjacentClosed(const std::vector<wire::MemberInfo>& ring) {
  for (size_t i = 0; ring.size() >= 2 && i < ring.size(); ++i) {
    if (!wire::linkable(ring[i], ring[(i + 1) % ring.size()])) return true;
  }
  return false;
}

std::vector<uint8_t> tags(const std::vector<wire::MemberInfo>& ring) {
  std::vector<uint8_t> out;
  for (const auto& m : ring) out.push_back(m.id[0]);
  return out;
}

}  // namespace

TEST_CASE("reachability: whoever can be dialled is dialled, on different hosts only", "[reach]") {
  const auto open = member(1, true), closed = member(2, false), closed2 = member(3, false);
  CHECK(wire::opensLink(open, open));
  CHECK(wire::opensLink(closed, open));     // the sender can dial its receiver: as always
  CHECK_FALSE(wire::opensLink(open, closed));  // the receiver cannot be dialled: it dials
  CHECK(wire::linkable(open, closed));
  CHECK_FALSE(wire::linkable(closed, closed2));
  // On one host every member reaches the others' ports: nothing turns round.
  const auto here = member(4, false, "10.0.0.9"), there = member(5, true, "10.0.0.9");
  CHECK(wire::opensLink(there, here));
  CHECK(wire::linkable(here, member(6, false, "10.0.0.9")));
}

TEST_CASE("reachability: planRing turns a link round where its receiver cannot be dialled", "[reach]") {
  // Ring a -> b -> c -> a, b cannot be dialled.
  const std::vector<wire::MemberInfo> ring{member(1, true), member(2, false), member(3, true)};
  const peer::RingPlan a = peer::planRing(ring, ring[0].id, 7);
  CHECK_FALSE(a.dial_successor);  // b dials a for a's sends
  CHECK_FALSE(a.dial_predecessor);
  const peer::RingPlan b = peer::planRing(ring, ring[1].id, 7);
  CHECK(b.dial_successor);    // b -> c as always
  CHECK(b.dial_predecessor);  // and b dials a for what a sends it
  CHECK(b.predecessor_at == ring[0]);
  const peer::RingPlan c = peer::planRing(ring, ring[2].id, 7);
  CHECK(c.dial_successor);
  CHECK_FALSE(c.dial_predecessor);
  // A ring of two: both links between the same pair, both opened by the one that cannot be dialled.
  const std::vector<wire::MemberInfo> two{member(1, true), member(2, false)};
  CHECK_FALSE(peer::planRing(two, two[0].id, 1).dial_successor);
  CHECK(peer::planRing(two, two[1].id, 1).dial_successor);
  CHECK(peer::planRing(two, two[1].id, 1).dial_predecessor);
}

TEST_CASE("reachability: the join order keeps members that cannot be dialled apart", "[reach]") {
  // Joined: open 1, closed 2, closed 3, open 4: the join order would pair 2 and 3.
  const std::vector<wire::MemberInfo> joined{member(1, true), member(2, false), member(3, false), member(4, true)};
  master::RingOrder o = master::orderRing(joined, {}, master::LinkBook{});
  REQUIRE(o.ring.size() == 4);
  CHECK_FALSE(adjacentClosed(o.ring));
  CHECK(tags(o.ring) == std::vector<uint8_t>{1, 2, 4, 3});
  // An order that is fine stays as it was (the previous ring first).
  o = master::orderRing(joined, {joined[1], joined[0], joined[2], joined[3]}, master::LinkBook{});
  CHECK(tags(o.ring) == std::vector<uint8_t>{2, 1, 3, 4});
  // More closed than open members: no such ring; the order is kept (a relay carries the link).
  const std::vector<wire::MemberInfo> crowded{member(1, true), member(2, false), member(3, false)};
  CHECK(tags(master::orderRing(crowded, {}, master::LinkBook{}).ring) == std::vector<uint8_t>{1, 2, 3});
}

TEST_CASE("reachability: the solver prefers direct links to relayed ones and measures only direct ones", "[reach]") {
  // Four members; 2 and 3 cannot be dialled, and their (impossible) links would be the fastest.
  const std::vector<wire::MemberInfo> joined{member(1, true), member(2, false), member(3, false), member(4, true)};
  master::LinkBook book;
  const auto fast = master::MeasuredLink{1000000000u, 1000};
  const auto slow = master::MeasuredLink{10000000u, 1000};
  for (size_t a = 0; a < 4; ++a) {
    for (size_t b = 0; b < 4; ++b) {
      if (a == b || !wire::linkable(joined[a], joined[b])) continue;
      book.record(joined[a].id, joined[b].id, a == 0 || b == 0 ? slow : fast);
    }
  }
  // The survey leaves out the pairs that cannot connect, and the book then covers the group.
  const std::vector<master::ProbePair> pairs = master::linksToMeasure(joined, book, true);
  CHECK(pairs.size() == 12 - 2);
  for (const auto& p : pairs) CHECK(wire::linkable(joined[p.first], joined[p.second]));
  CHECK(master::linksToMeasure(joined, book, false).empty());
  const master::RingOrder o = master::orderRing(joined, {}, book);
  CHECK(o.measured);
  CHECK_FALSE(adjacentClosed(o.ring));
  CHECK(o.bottleneck == Approx(10e6));
  // A ring of direct links wins even where a relayed one would look faster: every direct ring runs
  // 2 <-> 4 <-> 3 at 10 MB/s, while 1 -> 2 -> (via 1) 3 -> 4 -> 1 would be estimated at 500 MB/s.
  master::LinkBook skew;
  for (size_t a = 0; a < 4; ++a) {
    for (size_t b = 0; b < 4; ++b) {
      if (a == b || !wire::linkable(joined[a], joined[b])) continue;
      const bool slow_link = (a == 3 && (b == 1 || b == 2)) || (b == 3 && (a == 1 || a == 2));  // 4 <-> 2, 3
      skew.record(joined[a].id, joined[b].id, slow_link ? slow : fast);
    }
  }
  const master::RingOrder d = master::orderRing(joined, {}, skew);
  CHECK(d.measured);
  CHECK_FALSE(adjacentClosed(d.ring));
  CHECK(d.bottleneck == Approx(10e6));
  // Three closed of four: no direct ring; the relayed estimate orders it, and it is still measured.
  const std::vector<wire::MemberInfo> closed3{member(1, true), member(2, false), member(3, false), member(4, false)};
  master::LinkBook star;
  for (size_t k = 1; k < 4; ++k) {
    star.record(closed3[0].id, closed3[k].id, fast);
    star.record(closed3[k].id, closed3[0].id, fast);
  }
  const master::RingOrder r = master::orderRing(closed3, {}, star);
  CHECK(r.measured);
  CHECK(r.bottleneck == Approx(500e6));
}

TEST_CASE("reachability: withheld() keeps pending closed members out while nobody could relay", "[reach]") {
  using V = std::vector<size_t>;
  // Two closed members alone: the later one waits (no member can relay their links).
  CHECK(master::withheld({member(1, false), member(2, false)}, {true, true}) == V{1});
  CHECK(master::withheld({member(1, false), member(2, false), member(3, false)}, {false, true, true}) == V{1, 2});
  // One alone is always placeable.
  CHECK(master::withheld({member(1, false)}, {true}).empty());
  // A member already in the ring is never withheld.
  CHECK(master::withheld({member(1, false), member(2, false)}, {false, false}).empty());
  // One member that can be dialled relays whatever the others need.
  CHECK(master::withheld({member(1, false), member(2, true), member(3, false), member(4, false)},
                         {false, false, true, true})
            .empty());
  // Groups are counted apart; a relay may sit in another group.
  auto g1 = member(5, false);
  g1.group = 1;
  CHECK(master::withheld({member(1, false), member(2, false), g1}, {false, true, true}) == V{1});
  CHECK(master::withheld({member(1, false), member(2, false), g1, member(6, true)}, {false, true, true, true}).empty());
}

TEST_CASE("reachability: assignRelays gives every link between two closed members a relay", "[reach]") {
  // Ring 1(open) -> 2 -> 3 -> 4 -> back to 1; 2, 3, 4 closed: links 2->3 and 3->4 need relays, only 1 can.
  std::vector<wire::MemberInfo> ring{member(1, true), member(2, false), member(3, false), member(4, false)};
  ring[0].relay = ring[3].id;  // stale: cleared
  CHECK(master::assignRelays(ring) == 0);
  CHECK_FALSE(ring[0].hasRelay());
  CHECK(ring[1].relay == ring[0].id);
  CHECK(ring[2].relay == ring[0].id);
  CHECK_FALSE(ring[3].hasRelay());
  // Two open members share the load: 2->3 and 3->4 get different relays.
  ring.push_back(member(5, true));
  ring[4].group = 0;
  std::vector<wire::MemberInfo> five{ring[0], ring[1], ring[2], ring[3], ring[4]};
  // Order 1 -> 2 -> 3 -> 4 -> 5: links 2->3, 3->4 relayed.
  CHECK(master::assignRelays(five) == 0);
  CHECK(five[1].relay != five[2].relay);
  CHECK((five[1].relay == five[0].id || five[1].relay == five[4].id));
  // A relay in another group serves; none at all leaves the links unrelayed.
  std::vector<wire::MemberInfo> apart{member(1, false), member(2, false), member(3, true)};
  apart[2].group = 7;
  CHECK(master::assignRelays(apart) == 0);
  CHECK(apart[0].relay == apart[2].id);
  CHECK(apart[1].relay == apart[2].id);
  std::vector<wire::MemberInfo> none{member(1, false), member(2, false)};
  CHECK(master::assignRelays(none) == 2);
  // The peers' view: which links a member relays, with their connections.
  const auto links = peer::relayedBy(ring, ring[0].id);
  REQUIRE(links.size() == 2);
  CHECK(links[0].from.id == ring[1].id);
  CHECK(links[0].to.id == ring[2].id);
  CHECK(links[0].connections == 2);
  const peer::RingPlan at2 = peer::planRing(ring, ring[1].id, 3);
  CHECK(at2.successor_relayed);
  CHECK(at2.successor_relay.id == ring[0].id);
  CHECK_FALSE(at2.predecessor_relayed);  // 1 -> 2: 2 dials 1 (it turns round)
  const peer::RingPlan at3 = peer::planRing(ring, ring[2].id, 3);
  CHECK(at3.predecessor_relayed);
  CHECK(at3.successor_relayed);
  CHECK_FALSE(at3.dial_predecessor);
}

TEST_CASE("reachability: the membership admits closed members once a member can relay for them", "[reach]") {
  master::Membership m;
  auto ready = [&m] {
    for (const auto& r : m.ring()) m.p2pReady(r.id, m.epoch());
  };
  const auto a = member(1, false), b = member(2, false), c = member(3, true), d = member(4, true);
  m.join(a);
  ready();
  m.join(b);
  // Nobody could relay between a and b: nothing to admit, and arePeersPending says so.
  CHECK(m.pendingCount() == 1);
  CHECK(m.status().pending == 0);
  m.vote(a.id);
  ready();
  CHECK(m.ring().size() == 1);
  m.join(c);
  CHECK(m.status().pending == 2);  // c, and with it b: c relays the link between a and b
  m.vote(a.id);
  ready();
  REQUIRE(m.ring().size() == 3);
  size_t relayed = 0;
  for (const auto& r : m.ring()) relayed += r.relay == c.id ? 1 : 0;
  CHECK(relayed == 1);
  m.join(d);
  m.vote(a.id);
  m.vote(b.id);
  m.vote(c.id);
  REQUIRE(m.ring().size() == 4);
  CHECK_FALSE(adjacentClosed(m.ring()));  // kept apart now: no relay
  for (const auto& r : m.ring()) CHECK_FALSE(r.hasRelay());
  CHECK(m.pendingCount() == 0);
}

TEST_CASE("reachability: two closed members make a group flat", "[reach]") {
  auto in = [](uint8_t tag, bool inbound, const char* region) {
    auto m = member(tag, inbound);
    m.region = region;
    return m;
  };
  std::vector<wire::MemberInfo> ring{in(1, true, "eu"), in(2, false, "eu"), in(3, true, "us"), in(4, true, "us")};
  const std::map<wire::Uuid, uint8_t> asked{{ring[0].id, static_cast<uint8_t>(wire::Levels::kTwoLevel)}};
  CHECK(master::decideLevels(ring, asked, master::LinkBook{}).at(0).levels == wire::Levels::kTwoLevel);
  ring[3].inbound = 0;
  const auto choice = master::decideLevels(ring, asked, master::LinkBook{}).at(0);
  CHECK(choice.levels == wire::Levels::kFlat);
  CHECK(choice.why.find("cannot be dialled") != std::string::npos);
}

TEST_CASE("reachability: a link survey's plans say who dials", "[reach]") {
  const std::vector<wire::MemberInfo> members{member(1, true), member(2, false)};
  master::LinkSurvey survey;
  master::SurveyConfig config;
  const master::Effects fx =
      survey.begin(members, {master::ProbePair{0, 1}, master::ProbePair{1, 0}}, config, Clock::now());
  size_t seen = 0;
  for (const auto& o : fx) {
    auto h = wire::decodeHeader(o.frame.data(), o.frame.size(), wire::kMaxControlPayload);
    REQUIRE(h.isOk());
    auto plan = wire::decodePayload<wire::ProbePlan>(o.frame.data() + wire::kHeaderSize, h->length);
    REQUIRE(plan.isOk());
    const bool to_closed = plan->has_target ? plan->target.inbound == 0 : false;
    if (plan->has_target) CHECK(plan->target_dials == to_closed);  // 1 -> 2: 2 dials 1
    if (plan->has_source) CHECK(plan->dial_source == (o.to == members[1].id && plan->source.inbound != 0));
    ++seen;
  }
  CHECK(seen >= 2);
}

TEST_CASE("reachability: a shared-state receiver fetches only from holders it can dial", "[reach]") {
  auto peer = [](uint8_t id, wire::SyncStrategy s, uint8_t digest, bool inbound, const char* host) {
    master::SyncParticipant p;
    p.id[0] = id;
    p.announce.revision = 1;
    p.announce.strategy = static_cast<uint8_t>(s);
    wire::Digest32 d{};
    d.fill(digest);
    p.announce.keys = {wire::SyncKey{"w", 10, 100, d}};
    p.inbound = inbound;
    p.host = host;
    return p;
  };
  constexpr auto kEnforce = wire::SyncStrategy::kEnforcePopular;
  // Holders 1 (open) and 2 (closed) hold the elected digest 7; receiver 3 (open) fetches from 1 only.
  std::vector<master::SyncParticipant> peers{peer(1, kEnforce, 7, true, "a"), peer(2, kEnforce, 7, false, "b"),
                                             peer(3, kEnforce, 9, true, "c")};
  master::SyncElection e = master::electSharedState(peers);
  REQUIRE(e.plans[2].status.isOk());
  REQUIRE(e.plans[2].fetches.size() == 1);
  CHECK(e.plans[2].fetches[0].sources == std::vector<wire::Uuid>{peers[0].id});
  // Every holder closed, the receiver closed too, on another host: Unsupported, naming the key.
  peers[0].inbound = false;
  peers[2].inbound = false;
  e = master::electSharedState(peers);
  CHECK(e.plans[2].status.code() == Code::kUnsupported);
  CHECK(e.plans[2].status.message().find("'w'") != std::string::npos);
  CHECK(e.plans[0].status.isOk());
  // A holder on the receiver's host is dialled whatever it declared.
  peers[1].host = "c";
  e = master::electSharedState(peers);
  REQUIRE(e.plans[2].status.isOk());
  CHECK(e.plans[2].fetches[0].sources == std::vector<wire::Uuid>{peers[1].id});
}
