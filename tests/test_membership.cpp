// The master's membership state machine on its own: inputs in, messages out, no sockets.
#include <catch2/catch.hpp>

#include "master/membership.hpp"
#include "peer/peer_state.hpp"
#include "peer/ring_pool.hpp"

using namespace pccl;
using master::Effects;
using master::Membership;

namespace {

wire::MemberInfo member(uint8_t tag, uint32_t group = 0) {
  wire::MemberInfo m;
  m.id[0] = tag;
  m.host = "127.0.0.1";
  m.port = static_cast<uint16_t>(1000 + tag);
  m.group = group;
  m.connections = 2;
  return m;
}

// Messages of one type in `fx`, by recipient.
std::vector<wire::Uuid> recipients(const Effects& fx, wire::MsgType type) {
  std::vector<wire::Uuid> out;
  for (const auto& o : fx) {
    auto h = wire::decodeHeader(o.frame.data(), o.frame.size(), wire::kMaxControlPayload);
    REQUIRE(h.isOk());
    if (h->type == static_cast<uint16_t>(type)) out.push_back(o.to);
  }
  return out;
}

template <typename Msg>
Msg first(const Effects& fx) {
  for (const auto& o : fx) {
    auto h = wire::decodeHeader(o.frame.data(), o.frame.size(), wire::kMaxControlPayload);
    if (h->type == static_cast<uint16_t>(Msg::kType)) {
      auto m = wire::decodePayload<Msg>(o.frame.data() + wire::kHeaderSize, h->length);
      REQUIRE(m.isOk());
      return *m;
    }
  }
  FAIL("no such message");
  return Msg{};
}

// Everyone in the ring reports its connections up.
Effects allReady(Membership& m) {
  Effects last;
  auto ring = m.ring();
  for (const auto& r : ring) last = m.p2pReady(r.id, m.epoch());
  return last;
}

}  // namespace

TEST_CASE("membership: the first peer is admitted at once, later ones pend", "[membership]") {
  Membership m;
  auto a = member(1), b = member(2);
  Effects fx = m.join(a);
  CHECK(recipients(fx, wire::MsgType::kTopologyUpdate) == std::vector<wire::Uuid>{a.id});
  CHECK(m.epoch() == 1);
  CHECK(m.runPhase() == Membership::RunPhase::kBuilding);
  fx = m.p2pReady(a.id, 1);
  CHECK(recipients(fx, wire::MsgType::kTopologyReady) == std::vector<wire::Uuid>{a.id});
  CHECK(m.runPhase() == Membership::RunPhase::kStable);
  fx = m.join(b);
  CHECK(fx.empty());
  CHECK(m.pendingCount() == 1);
  CHECK(m.status().pending == 1);
}

TEST_CASE("membership: an update runs when every accepted peer has voted", "[membership]") {
  Membership m;
  auto a = member(1), b = member(2), c = member(3);
  m.join(a);
  allReady(m);
  m.join(b);
  m.vote(a.id);  // a alone is every accepted peer
  CHECK(m.epoch() == 2);
  allReady(m);
  m.join(c);
  Effects fx = m.vote(a.id);
  CHECK(recipients(fx, wire::MsgType::kTopologyUpdate).empty());
  CHECK(m.status().vote_open == 1);
  fx = m.withdrawVote(a.id);
  CHECK(m.status().vote_open == 0);
  m.vote(a.id);
  fx = m.vote(b.id);
  auto update = first<wire::TopologyUpdate>(fx);
  CHECK(update.epoch == 3);
  REQUIRE(update.ring.size() == 3);
  CHECK(update.ring[0].id == a.id);  // join order
  CHECK(update.ring[2].id == c.id);
  CHECK(recipients(fx, wire::MsgType::kTopologyUpdate).size() == 3);
  fx = allReady(m);
  CHECK(recipients(fx, wire::MsgType::kTopologyReady).size() == 3);
  CHECK(m.status().vote_open == 0);
  CHECK(m.status().stale == 0);
}

TEST_CASE("membership: a peer lost while the ring is built fails the build for everyone", "[membership]") {
  Membership m;
  auto a = member(1), b = member(2), c = member(3);
  m.join(a);
  allReady(m);
  m.join(b);
  m.join(c);
  m.vote(a.id);
  REQUIRE(m.runPhase() == Membership::RunPhase::kBuilding);
  m.p2pReady(a.id, m.epoch());
  Effects fx = m.remove(c.id, wire::LeaveReason::kTimeout, "no heartbeat");
  CHECK(recipients(fx, wire::MsgType::kPeerLeft).size() == 2);
  auto failed = recipients(fx, wire::MsgType::kTopologyFailed);
  CHECK(failed.size() == 2);
  CHECK(first<wire::TopologyFailed>(fx).code == static_cast<uint16_t>(Code::kPeerLost));
  CHECK(m.runPhase() == Membership::RunPhase::kStable);
  CHECK(m.status().stale == 1);
  // Survivors vote again and get a ring without c.
  m.vote(a.id);
  fx = m.vote(b.id);
  CHECK(first<wire::TopologyUpdate>(fx).ring.size() == 2);
  allReady(m);
  CHECK(m.status().stale == 0);
}

TEST_CASE("membership: P2PFailed and stale P2PReady", "[membership]") {
  Membership m;
  auto a = member(1), b = member(2);
  m.join(a);
  allReady(m);
  m.join(b);
  m.vote(a.id);
  const uint64_t e = m.epoch();
  CHECK(m.p2pReady(a.id, e - 1).empty());  // an old epoch changes nothing
  Effects fx = m.p2pFailed(b.id, e, Code::kTimeout, "connect refused");
  CHECK(recipients(fx, wire::MsgType::kTopologyFailed).size() == 2);
  CHECK_THAT(first<wire::TopologyFailed>(fx).reason, Catch::Contains("connect refused"));
  // Until a ring is built, the run is stale and says why (what collectives are refused with).
  CHECK(m.status().stale == 1);
  CHECK_THAT(m.staleReason(), Catch::Contains("ring build of epoch " + std::to_string(e) + " failed") &&
                                  Catch::Contains(wire::shortId(b.id)) && Catch::Contains("connect refused"));
  m.vote(a.id);
  m.vote(b.id);
  allReady(m);
  CHECK(m.status().stale == 0);
  CHECK(m.staleReason().empty());
  m.markStale("a transfer: tag 3 failed");
  CHECK_THAT(m.staleReason(), Catch::Contains("lost a transfer: tag 3 failed"));
  m.remove(b.id, wire::LeaveReason::kTimeout, "no heartbeat for 1200 ms");
  CHECK_THAT(m.staleReason(), Catch::Contains("lost peer " + wire::shortId(b.id)) && Catch::Contains("no heartbeat"));
}

TEST_CASE("membership: a departure completes a vote that only waited for it", "[membership]") {
  Membership m;
  auto a = member(1), b = member(2);
  m.join(a);
  allReady(m);
  m.join(b);
  m.vote(a.id);
  allReady(m);
  m.vote(a.id);
  Effects fx = m.remove(b.id, wire::LeaveReason::kConnectionLost, "");
  CHECK(first<wire::TopologyUpdate>(fx).ring.size() == 1);
  // And votes from strangers are ignored.
  CHECK(m.vote(member(9).id).empty());
}

TEST_CASE("membership: when the last member leaves, pending peers are admitted", "[membership]") {
  Membership m;
  auto a = member(1), b = member(2);
  m.join(a);
  allReady(m);
  m.join(b);
  Effects fx = m.remove(a.id, wire::LeaveReason::kGraceful, "");
  CHECK(recipients(fx, wire::MsgType::kTopologyUpdate) == std::vector<wire::Uuid>{b.id});
}

TEST_CASE("membership: ring neighbours are chosen within the group", "[membership]") {
  std::vector<wire::MemberInfo> ring = {member(1, 0), member(2, 1), member(3, 0), member(4, 1), member(5, 0)};
  for (auto& m : ring) m.host = "10.0.0." + std::to_string(m.id[0]);
  for (auto& m : ring) m.ring_key.fill(m.id[0]);
  ring[2].connections = 3;
  peer::RingPlan p = peer::planRing(ring, ring[2].id, 7);
  CHECK_FALSE(p.alone);
  CHECK(p.epoch == 7);
  CHECK(p.successor.id == ring[4].id);
  CHECK(p.predecessor == ring[0].id);
  CHECK(p.predecessor_key == ring[0].ring_key);  // its hellos must verify with the key the master listed
  CHECK(p.successor_connections == 3);
  CHECK(p.predecessor_connections == 2);
  p = peer::planRing(ring, ring[4].id, 7);  // wraps around
  CHECK(p.successor.id == ring[0].id);
  CHECK(peer::planRing({member(1)}, member(1).id, 1).alone);
  CHECK(peer::planRing(ring, member(9).id, 1).alone);  // not in the ring
  std::vector<wire::MemberInfo> two = {member(1), member(2)};
  p = peer::planRing(two, two[0].id, 1);
  CHECK(p.successor.id == two[1].id);
  CHECK(p.predecessor == two[1].id);
}

TEST_CASE("membership: links between peers on the same host use their same-host connection count and lend", "[membership]") {
  CHECK(peer::sameHost("127.0.0.1", "127.0.0.1"));
  CHECK(peer::sameHost("127.0.0.1", "127.0.0.2"));
  CHECK(peer::sameHost("localhost", "::1"));
  CHECK(peer::sameHost("10.1.2.3", "10.1.2.3"));
  CHECK(peer::sameHost("gpu-a.example", "gpu-a.example"));
  CHECK_FALSE(peer::sameHost("10.1.2.3", "10.1.2.4"));
  CHECK_FALSE(peer::sameHost("10.1.2.3", "127.0.0.1"));
  CHECK_FALSE(peer::sameHost("", ""));

  // a (host X) -> b (host X) -> c (host Y) -> a
  std::vector<wire::MemberInfo> ring = {member(1), member(2), member(3)};
  ring[0].host = ring[1].host = "10.0.0.1";
  ring[2].host = "10.0.0.2";
  for (auto& m : ring) {
    m.connections = 8;
    m.host_connections = 1;
  }
  ring[1].host_connections = 2;
  peer::RingPlan a = peer::planRing(ring, ring[0].id, 1);
  peer::RingPlan b = peer::planRing(ring, ring[1].id, 1);
  peer::RingPlan c = peer::planRing(ring, ring[2].id, 1);
  CHECK(a.successor_connections == 1);    // a -> b on one host: a's host_connections
  CHECK(b.predecessor_connections == 1);  // and b expects the same number
  CHECK(b.successor_connections == 8);    // b -> c across hosts: b's connections
  CHECK(c.predecessor_connections == 8);
  CHECK(c.successor_connections == 8);
  CHECK(a.predecessor_connections == 8);
  // Same-host links lend payloads (net/lending.hpp); both ends of a link decide alike.
  CHECK(a.successor_same_host);
  CHECK(b.predecessor_same_host);
  CHECK_FALSE(b.successor_same_host);
  CHECK_FALSE(c.predecessor_same_host);
  CHECK_FALSE(c.successor_same_host);
  CHECK_FALSE(a.predecessor_same_host);
  ring[0].host_connections = 0;  // 0 (older peers): as connections
  CHECK(peer::planRing(ring, ring[0].id, 1).successor_connections == 8);
  CHECK(peer::planRing(ring, ring[1].id, 1).predecessor_connections == 8);
}

TEST_CASE("membership: the peer state machine allows only documented transitions", "[membership]") {
  using peer::PeerState;
  using peer::isLegalTransition;
  CHECK(isLegalTransition(PeerState::kIdle, PeerState::kConnecting));
  CHECK(isLegalTransition(PeerState::kConnecting, PeerState::kPending));
  CHECK(isLegalTransition(PeerState::kPending, PeerState::kBuildingRing));
  CHECK(isLegalTransition(PeerState::kBuildingRing, PeerState::kMember));
  CHECK(isLegalTransition(PeerState::kMember, PeerState::kVoting));
  CHECK(isLegalTransition(PeerState::kVoting, PeerState::kBuildingRing));
  CHECK(isLegalTransition(PeerState::kVoting, PeerState::kMember));
  CHECK(isLegalTransition(PeerState::kMember, PeerState::kFailed));
  CHECK(isLegalTransition(PeerState::kMember, PeerState::kLeft));
  CHECK_FALSE(isLegalTransition(PeerState::kIdle, PeerState::kMember));
  CHECK_FALSE(isLegalTransition(PeerState::kPending, PeerState::kVoting));
  CHECK_FALSE(isLegalTransition(PeerState::kLeft, PeerState::kConnecting));
  CHECK_FALSE(isLegalTransition(PeerState::kFailed, PeerState::kIdle));
  CHECK_FALSE(isLegalTransition(PeerState::kIdle, PeerState::kLeft));
}
