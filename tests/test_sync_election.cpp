// The master's shared-state election (master/sync_election.hpp) and the sync messages' limits:
// revision and majority rules, strategies, mismatched key sets, and hostile announcements.
#include <catch2/catch.hpp>

#include "master/sync_coordinator.hpp"
#include "master/sync_election.hpp"
#include "wire/frame.hpp"

using namespace pccl;
using namespace pccl::wire;
using pccl::master::Effects;
using pccl::master::electSharedState;
using pccl::master::SyncCoordinator;
using pccl::master::SyncParticipant;

namespace {

Digest32 digest(uint8_t v) {
  Digest32 d{};
  d.fill(v);
  return d;
}
Uuid idOf(uint8_t v) {
  Uuid u{};
  u.fill(v);
  return u;
}

// A peer with keys "w" (float32 x 100) and "m" (float32 x 10) holding the given digests.
SyncParticipant peer(uint8_t id, uint64_t revision, SyncStrategy s, uint8_t w, uint8_t m) {
  SyncParticipant p;
  p.id = idOf(id);
  p.announce.revision = revision;
  p.announce.strategy = static_cast<uint8_t>(s);
  p.announce.keys = {SyncKey{"w", 10, 100, digest(w)}, SyncKey{"m", 10, 10, digest(m)}};
  return p;
}

constexpr auto kEnforce = SyncStrategy::kEnforcePopular;
constexpr auto kReceive = SyncStrategy::kReceiveOnly;
constexpr auto kSend = SyncStrategy::kSendOnly;

}  // namespace

TEST_CASE("sync election: identical peers fetch nothing", "[sync]") {
  auto e = electSharedState({peer(1, 5, kEnforce, 1, 2), peer(2, 5, kEnforce, 1, 2), peer(3, 5, kEnforce, 1, 2)});
  CHECK(e.revision == 5);
  for (const auto& p : e.plans) {
    CHECK(p.status.isOk());
    CHECK(p.fetches.empty());
  }
}

TEST_CASE("sync election: a new peer at revision 0 fetches only the keys that differ, from every holder",
          "[sync]") {
  // Peer 3 just joined: same model bytes by chance for "w" (same seed), fresh optimizer state "m".
  auto e = electSharedState({peer(1, 9, kEnforce, 1, 2), peer(2, 9, kEnforce, 1, 2), peer(3, 0, kEnforce, 1, 7)});
  CHECK(e.revision == 9);
  CHECK(e.plans[0].fetches.empty());
  CHECK(e.plans[1].fetches.empty());
  REQUIRE(e.plans[2].fetches.size() == 1);
  CHECK(e.plans[2].fetches[0].key == 1);
  CHECK(e.plans[2].fetches[0].digest == digest(2));  // what the fetched bytes must hash to
  CHECK(e.plans[2].fetches[0].sources == std::vector<Uuid>{idOf(1), idOf(2)});
}

TEST_CASE("sync election: the highest revision wins over a majority at a lower one", "[sync]") {
  auto e = electSharedState({peer(1, 4, kEnforce, 1, 1), peer(2, 4, kEnforce, 1, 1), peer(3, 5, kEnforce, 2, 2)});
  CHECK(e.revision == 5);
  CHECK(e.plans[0].fetches.size() == 2);
  CHECK(e.plans[1].fetches.size() == 2);
  CHECK(e.plans[2].fetches.empty());
  CHECK(e.plans[0].fetches[0].sources == std::vector<Uuid>{idOf(3)});
}

TEST_CASE("sync election: majority per key at the top revision, and ties go to the smallest digest", "[sync]") {
  auto e = electSharedState({peer(1, 3, kEnforce, 8, 4), peer(2, 3, kEnforce, 8, 5), peer(3, 3, kEnforce, 9, 4),
                             peer(4, 3, kEnforce, 8, 5)});
  // w: 8 has three votes. m: 4 and 5 have two each -> 4.
  CHECK(e.plans[0].fetches.empty());
  REQUIRE(e.plans[1].fetches.size() == 1);
  CHECK(e.plans[1].fetches[0].key == 1);
  REQUIRE(e.plans[2].fetches.size() == 1);
  CHECK(e.plans[2].fetches[0].key == 0);
  CHECK(e.plans[2].fetches[0].sources == std::vector<Uuid>{idOf(1), idOf(2), idOf(4)});
  REQUIRE(e.plans[3].fetches.size() == 1);
  CHECK(e.plans[3].fetches[0].sources == std::vector<Uuid>{idOf(1), idOf(3)});
}

TEST_CASE("sync election: strategies — send-only never receives, receive-only never votes", "[sync]") {
  // The receive-only peer has the highest revision, but it does not count; the send-only one wins
  // the vote on its own and keeps its content.
  auto e = electSharedState({peer(1, 2, kSend, 1, 1), peer(2, 99, kReceive, 3, 3), peer(3, 1, kEnforce, 1, 5)});
  CHECK(e.revision == 2);
  CHECK(e.plans[0].fetches.empty());
  CHECK(e.plans[1].fetches.size() == 2);
  REQUIRE(e.plans[2].fetches.size() == 1);
  CHECK(e.plans[2].fetches[0].sources == std::vector<Uuid>{idOf(1)});
  // A send-only peer outvoted keeps its bytes and is no source.
  auto f = electSharedState({peer(1, 2, kSend, 7, 1), peer(2, 2, kEnforce, 1, 1), peer(3, 2, kEnforce, 1, 1)});
  CHECK(f.plans[0].fetches.empty());
  for (size_t i = 1; i < 3; ++i) CHECK(f.plans[i].fetches.empty());
  // Nobody offers content: every peer is told so.
  auto g = electSharedState({peer(1, 2, kReceive, 1, 1), peer(2, 2, kReceive, 1, 1)});
  for (const auto& p : g.plans) CHECK(p.status.code() == Code::kInvalidUsage);
}

TEST_CASE("sync election: mismatched keys, sizes or dtypes fail only the offending peer", "[sync]") {
  auto odd_size = peer(3, 5, kEnforce, 1, 2);
  odd_size.announce.keys[0].count = 101;
  auto odd_dtype = peer(4, 5, kEnforce, 1, 2);
  odd_dtype.announce.keys[1].dtype = 11;
  auto extra = peer(5, 0, kReceive, 1, 2);
  extra.announce.keys.push_back(SyncKey{"lr", 10, 1, digest(0)});
  auto twice = peer(6, 0, kEnforce, 1, 2);
  twice.announce.keys[1].name = "w";
  auto e = electSharedState({peer(1, 5, kEnforce, 1, 2), peer(2, 5, kEnforce, 1, 3), odd_size, odd_dtype, extra, twice});
  CHECK(e.plans[0].status.isOk());
  CHECK(e.plans[1].status.isOk());
  CHECK(e.plans[2].status.code() == Code::kInvalidArgument);
  CHECK_THAT(e.plans[2].status.message(), Catch::Contains("'w' has 101 elements"));
  CHECK(e.plans[3].status.code() == Code::kInvalidArgument);
  CHECK_THAT(e.plans[3].status.message(), Catch::Contains("'m' has dtype 11"));
  CHECK(e.plans[4].status.code() == Code::kInvalidArgument);
  CHECK_THAT(e.plans[4].status.message(), Catch::Contains("'lr' is unknown"));
  CHECK(e.plans[5].status.code() == Code::kInvalidArgument);
  // The mismatched peers are no sources: "m" (tie 2 vs 3 between peers 1 and 2) comes from peer 1 only.
  REQUIRE(e.plans[1].fetches.size() == 1);
  CHECK(e.plans[1].fetches[0].sources == std::vector<Uuid>{idOf(1)});
}

TEST_CASE("sync election: keys may be registered in any order", "[sync]") {
  auto swapped = peer(2, 0, kEnforce, 1, 9);
  std::swap(swapped.announce.keys[0], swapped.announce.keys[1]);
  auto e = electSharedState({peer(1, 3, kEnforce, 1, 2), swapped});
  CHECK(e.plans[0].fetches.empty());
  REQUIRE(e.plans[1].fetches.size() == 1);
  CHECK(e.plans[1].fetches[0].key == 0);  // "m" is first in peer 2's own list
}

TEST_CASE("sync messages: hostile counts and strategies are refused before allocating", "[sync][wire]") {
  std::vector<uint8_t> v;
  ByteWriter w(&v);
  w.u64(1);
  w.u64(1);
  w.u8(0);
  w.u32(0xffffffffu);  // keys
  ByteReader r(v.data(), v.size());
  CHECK(SyncAnnounce::decode(r).status().code() == Code::kProtocolError);
  v[16] = 9;  // strategy
  ByteReader r2(v.data(), v.size());
  CHECK(SyncAnnounce::decode(r2).status().code() == Code::kProtocolError);
  SyncPlan plan;
  plan.fetches.push_back(SyncFetch{0, {}, {}});  // a key with no source
  std::vector<uint8_t> p;
  ByteWriter pw(&p);
  plan.encode(pw);
  ByteReader pr(p.data(), p.size());
  CHECK(SyncPlan::decode(pr).status().code() == Code::kProtocolError);
}

namespace {

// The decoded messages of type Msg in fx, with their recipients.
template <typename Msg>
std::vector<std::pair<Uuid, Msg>> sent(const Effects& fx) {
  std::vector<std::pair<Uuid, Msg>> out;
  for (const auto& o : fx) {
    auto h = decodeHeader(o.frame.data(), o.frame.size(), kMaxControlPayload);
    REQUIRE(h.isOk());
    if (h->type != static_cast<uint16_t>(Msg::kType)) continue;
    auto m = decodePayload<Msg>(o.frame.data() + kHeaderSize, h->length);
    REQUIRE(m.isOk());
    out.emplace_back(o.to, *m);
  }
  return out;
}

const std::vector<Uuid> kThree = {idOf(1), idOf(2), idOf(3)};

Effects announceAll(SyncCoordinator& c, const std::vector<SyncParticipant>& ps) {
  Effects fx;
  for (const auto& p : ps) {
    CHECK(fx.empty());  // nothing happens before the last member announced
    fx = c.announce(p.id, 0, kThree, 1, Status::ok(), p.announce);
  }
  return fx;
}

std::vector<SyncParticipant> withEpoch(std::vector<SyncParticipant> ps) {
  for (auto& p : ps) p.announce.epoch = 1;
  return ps;
}

}  // namespace

TEST_CASE("sync coordinator: plans after the last announcement, complete after every SyncDone", "[sync]") {
  SyncCoordinator c;
  auto fx = announceAll(c, withEpoch({peer(1, 4, kEnforce, 1, 2), peer(2, 4, kEnforce, 1, 2), peer(3, 0, kEnforce, 5, 5)}));
  auto plans = sent<SyncPlan>(fx);
  REQUIRE(plans.size() == 3);
  const uint64_t id = plans[0].second.sync_id;
  CHECK(id != 0);
  for (const auto& [to, plan] : plans) {
    CHECK(plan.code == 0);
    CHECK(plan.revision == 4);
    CHECK(plan.sync_id == id);
    CHECK(plan.fetches.size() == (to == idOf(3) ? 2u : 0u));
  }
  CHECK(c.runningCount() == 1);
  CHECK(c.done(idOf(1), SyncDone{id, 0, ""}).empty());
  CHECK(c.done(idOf(2), SyncDone{id, 0, ""}).empty());
  auto complete = sent<SyncComplete>(c.done(idOf(3), SyncDone{id, 0, ""}));
  CHECK(complete.size() == 3);
  for (const auto& m : complete) CHECK(m.second.code == 0);
  CHECK(c.runningCount() == 0);
}

TEST_CASE("sync coordinator: everybody up to date completes at once", "[sync]") {
  SyncCoordinator c;
  auto fx = announceAll(c, withEpoch({peer(1, 4, kEnforce, 1, 2), peer(2, 4, kEnforce, 1, 2), peer(3, 4, kEnforce, 1, 2)}));
  CHECK(sent<SyncPlan>(fx).size() == 3);
  CHECK(sent<SyncComplete>(fx).size() == 3);
  CHECK(c.runningCount() == 0);
}

TEST_CASE("sync coordinator: a failed transfer or a departure aborts everywhere, a mismatch only the offender",
          "[sync]") {
  SyncCoordinator c;
  auto odd = peer(3, 0, kEnforce, 5, 5);
  odd.announce.keys.pop_back();
  auto fx = announceAll(c, withEpoch({peer(1, 4, kEnforce, 1, 2), peer(2, 0, kEnforce, 1, 3), odd}));
  auto plans = sent<SyncPlan>(fx);
  REQUIRE(plans.size() == 3);
  CHECK(plans[2].second.code == static_cast<uint16_t>(Code::kInvalidArgument));
  CHECK(plans[2].second.sync_id == 0);
  const uint64_t id = plans[0].second.sync_id;
  auto aborted = sent<SyncComplete>(c.done(idOf(2), SyncDone{id, static_cast<uint16_t>(Code::kMismatch), "bad digest"}));
  REQUIRE(aborted.size() == 2);  // the two participants, not the mismatched peer
  CHECK(aborted[0].second.code == static_cast<uint16_t>(Code::kMismatch));
  CHECK_THAT(aborted[0].second.reason, Catch::Contains("bad digest"));
  // A second sync: peer 3 leaves while it runs.
  auto fx2 = announceAll(c, withEpoch({peer(1, 4, kEnforce, 1, 2), peer(2, 0, kEnforce, 1, 3), peer(3, 0, kReceive, 1, 3)}));
  REQUIRE(c.runningCount() == 1);
  auto gone = sent<SyncComplete>(c.peerGone(idOf(3), "killed"));
  CHECK(gone.size() == 3);
  CHECK(gone[0].second.code == static_cast<uint16_t>(Code::kPeerLost));
  CHECK(c.runningCount() == 0);
}

TEST_CASE("sync coordinator: wrong epoch, a vote or a departure abort the pending sync, a repeat does not", "[sync]") {
  SyncCoordinator c;
  auto p1 = peer(1, 4, kEnforce, 1, 2);
  p1.announce.epoch = 1;
  auto p2 = peer(2, 4, kEnforce, 1, 2);
  p2.announce.epoch = 0;  // an old ring
  CHECK(c.announce(idOf(1), 0, kThree, 1, Status::ok(), p1.announce).empty());
  auto fx = c.announce(idOf(2), 0, kThree, 1, Status::ok(), p2.announce);
  auto plans = sent<SyncPlan>(fx);
  REQUIRE(plans.size() == 2);
  CHECK(plans[0].second.code == static_cast<uint16_t>(Code::kTopologyChanged));  // a race: retryable
  CHECK(c.pendingCount() == 0);
  CHECK(c.announce(idOf(1), 0, kThree, 1, Status::ok(), p1.announce).empty());
  auto voted = sent<SyncPlan>(c.voteStarted(idOf(3)));
  REQUIRE(voted.size() == 1);
  CHECK(voted[0].second.code == static_cast<uint16_t>(Code::kTopologyChanged));
  CHECK(c.announce(idOf(1), 0, kThree, 1, Status::ok(), p1.announce).empty());
  // Announcing again (its earlier call ended while the master was away): the new call replaces it.
  CHECK(c.announce(idOf(1), 0, kThree, 1, Status::ok(), p1.announce).empty());
  CHECK(c.pendingCount() == 1);
  auto left = sent<SyncPlan>(c.peerGone(idOf(3), "left"));
  REQUIRE(left.size() == 1);
  CHECK(left[0].second.code == static_cast<uint16_t>(Code::kPeerLost));
  auto blocked = sent<SyncPlan>(c.announce(idOf(1), 0, kThree, 1, Status::peerLost("stale ring"), p1.announce));
  REQUIRE(blocked.size() == 1);
  CHECK(blocked[0].second.code == static_cast<uint16_t>(Code::kPeerLost));
  // A peer that gives up waiting withdraws (SyncDone with sync_id 0): the pending sync ends for all.
  CHECK(c.announce(idOf(1), 0, kThree, 1, Status::ok(), p1.announce).empty());
  auto p2ok = p1;
  CHECK(c.announce(idOf(2), 0, kThree, 1, Status::ok(), p2ok.announce).empty());
  auto withdrawn = sent<SyncPlan>(c.done(idOf(2), SyncDone{0, static_cast<uint16_t>(Code::kTimeout), "gave up"}));
  REQUIRE(withdrawn.size() == 2);
  CHECK(withdrawn[0].second.code == static_cast<uint16_t>(Code::kTimeout));
  CHECK_THAT(withdrawn[0].second.reason, Catch::Contains("gave up"));
  CHECK(c.pendingCount() == 0);
  CHECK(c.done(idOf(3), SyncDone{0, 1, "nothing pending"}).empty());
}

TEST_CASE("sync election: at most 16 sources per fetch, a different window of the holders per receiver", "[sync]") {
  std::vector<SyncParticipant> ps;
  for (uint8_t id = 1; id <= 20; ++id) ps.push_back(peer(id, 3, kEnforce, 1, 2));
  ps.push_back(peer(21, 0, kEnforce, 9, 9));
  ps.push_back(peer(22, 0, kReceive, 9, 9));
  auto e = electSharedState(ps);
  REQUIRE(e.plans[20].fetches.size() == 2);
  REQUIRE(e.plans[21].fetches.size() == 2);
  const auto& a = e.plans[20].fetches[0].sources;
  const auto& b = e.plans[21].fetches[0].sources;
  CHECK(a.size() == kMaxSyncFetchSources);
  CHECK(b.size() == kMaxSyncFetchSources);
  CHECK(a != b);
  for (const auto& id : a) CHECK(id[0] <= 20);  // holders only, never a receiver
}
