// The master's books of collectives (master/op_coordinator.hpp, master/tag_divergence.hpp) and the
// settling of operations in doubt (master/op_resolver.hpp) on their own: messages in, OpAbort / OpQuery /
// OpOutcome out, no sockets, and a fake clock for the divergence window.
#include <catch2/catch.hpp>

#include "master/op_coordinator.hpp"
#include "master/op_resolver.hpp"
#include "master/tag_divergence.hpp"
#include "wire/frame.hpp"

using namespace pccl;
using namespace pccl::wire;
using pccl::master::CrossedTag;
using pccl::master::Effects;
using pccl::master::findCrossedTags;
using pccl::master::OpCoordinator;
using pccl::master::OpResolver;

namespace {

Uuid idOf(uint8_t v) {
  Uuid u{};
  u.fill(v);
  return u;
}

const std::vector<Uuid> kThree = {idOf(1), idOf(2), idOf(3)};
constexpr uint64_t kEpoch = 4;

OpAnnounce ann(uint64_t tag, uint64_t count = 100, uint64_t epoch = kEpoch) {
  OpAnnounce a;
  a.tag = tag;
  a.count = count;
  a.dtype = 10;  // float32
  a.op = 0;      // sum
  a.epoch = epoch;
  a.segment_bytes = 1 << 20;
  return a;
}

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

Effects announce(OpCoordinator& c, uint8_t peer, const OpAnnounce& a, const Status& blocked = Status::ok()) {
  return c.announce(idOf(peer), 0, kThree, kEpoch, blocked, a);
}

}  // namespace

TEST_CASE("op coordinator: equal announcements are booked without a word, and the announcers' OpDone clear them",
          "[ops]") {
  OpCoordinator c;
  CHECK(announce(c, 1, ann(7)).empty());
  CHECK(announce(c, 3, ann(7)).empty());
  CHECK(c.pendingCount() == 1);
  CHECK(announce(c, 2, ann(7)).empty());  // nothing to start: the peers did not wait
  CHECK(c.pendingCount() == 0);
  CHECK(c.runningCount() == 1);
  CHECK(c.done(idOf(1), 0, OpDone{7, 0}).empty());
  CHECK(c.done(idOf(9), 0, OpDone{7, 0}).empty());  // not a member: ignored
  CHECK(c.done(idOf(2), 0, OpDone{7, 0}).empty());
  CHECK(c.runningCount() == 1);  // peer 3 may still wait for its commit: the entry stays for its abort
  CHECK(c.done(idOf(3), 0, OpDone{7, 0}).empty());
  CHECK(c.runningCount() == 0);

  // Members announce only calls that run a while (protocol 6): a call announced by one member alone
  // goes with that member's OpDone, whoever else made it.
  CHECK(announce(c, 1, ann(8)).empty());
  CHECK(c.pendingCount() == 1);
  CHECK(c.done(idOf(1), 0, OpDone{8, 0}).empty());
  CHECK(c.pendingCount() == 0);
  // A later announcement is booked again, and cleared by its own OpDone.
  CHECK(announce(c, 2, ann(8)).empty());
  CHECK(c.pendingCount() == 1);
  CHECK(c.done(idOf(2), 0, OpDone{8, 0}).empty());
  CHECK(c.pendingCount() == 0);
}

TEST_CASE("op coordinator: the calls of one tag are told apart by their number", "[ops]") {
  OpCoordinator c;
  OpAnnounce second = ann(7);
  second.seq = 1;
  CHECK(announce(c, 1, ann(7)).empty());
  CHECK(announce(c, 2, second).empty());  // peer 2 is a call ahead (its call 0 ended fast): not a duplicate
  CHECK(c.pendingCount() == 2);
  auto aborted = sent<OpAbort>(announce(c, 3, ann(7, 101)));  // differs from call 0 only
  REQUIRE(aborted.size() == 3);
  CHECK(aborted[0].second.seq == 0);
  CHECK(c.pendingCount() == 1);
}

TEST_CASE("op coordinator: a call announced again with the same descriptor is a no-op, a different one an error",
          "[ops]") {
  // A peer that came back to the master on a new connection (its old one still held here) announces
  // its calls in flight again (docs/protocol.md §8.8).
  OpCoordinator c;
  CHECK(announce(c, 1, ann(7)).empty());
  CHECK(announce(c, 2, ann(7)).empty());
  CHECK(announce(c, 1, ann(7)).empty());  // the repeat
  CHECK(c.pendingCount() == 1);
  CHECK(announce(c, 3, ann(7)).empty());
  CHECK(announce(c, 3, ann(7)).empty());
  CHECK(c.pendingCount() == 0);
  CHECK(c.runningCount() == 1);
  for (uint8_t p = 1; p <= 3; ++p) CHECK(c.done(idOf(p), 0, OpDone{7, 0}).empty());
  CHECK(c.runningCount() == 0);

  CHECK(announce(c, 1, ann(8)).empty());
  auto aborted = sent<OpAbort>(announce(c, 1, ann(8, 101)));  // the same call, another count: a bug
  REQUIRE(aborted.size() == 3);
  for (const auto& [to, m] : aborted) {
    CHECK(m.code == static_cast<uint16_t>(Code::kInvalidUsage));
    CHECK_THAT(m.reason, Catch::Contains("twice, differently") && Catch::Contains("count=101"));
  }
  CHECK(c.pendingCount() + c.runningCount() == 0);
}

TEST_CASE("op coordinator: a call announced after it was aborted hears the abort again, alone", "[ops]") {
  OpCoordinator c;
  CHECK(announce(c, 1, ann(7)).empty());
  REQUIRE(sent<OpAbort>(c.failed(idOf(1), 0, OpFailed{7, 0, static_cast<uint16_t>(Code::kTimeout), 0, "late"})).size() ==
          3);
  // Peer 2 missed it (sent on a connection that went dark) and announces the call from a new one.
  auto again = sent<OpAbort>(announce(c, 2, ann(7)));
  REQUIRE(again.size() == 1);
  CHECK(again[0].first == idOf(2));
  CHECK(again[0].second.code == static_cast<uint16_t>(Code::kTimeout));
  CHECK(c.pendingCount() + c.runningCount() == 0);
  // The same (tag, call) on the next ring is another call.
  CHECK(c.announce(idOf(2), 0, kThree, kEpoch + 1, Status::ok(), ann(7, 100, kEpoch + 1)).empty());
  CHECK(c.pendingCount() == 1);
}

TEST_CASE("op coordinator: reports lost with a connection leave nothing behind", "[ops]") {
  OpCoordinator c;
  // Call 0 of tag 7: everyone announced it, peer 3's OpDone never came (its connection went dark).
  for (uint8_t p = 1; p <= 3; ++p) CHECK(announce(c, p, ann(7)).empty());
  CHECK(c.done(idOf(1), 0, OpDone{7, 0}).empty());
  CHECK(c.done(idOf(2), 0, OpDone{7, 0}).empty());
  // Call 0 of tag 8: peer 2's announcement was lost.
  CHECK(announce(c, 1, ann(8)).empty());
  CHECK(announce(c, 3, ann(8)).empty());
  CHECK(c.runningCount() == 1);
  CHECK(c.pendingCount() == 1);
  // Announcing call 1 of a tag, a peer has ended call 0 of it.
  OpAnnounce next7 = ann(7);
  next7.seq = 1;
  CHECK(announce(c, 3, next7).empty());
  CHECK(c.runningCount() == 0);  // tag 7 call 0 is gone
  OpAnnounce next8 = ann(8);
  next8.seq = 1;
  CHECK(announce(c, 2, next8).empty());
  CHECK(c.pendingCount() == 2);  // call 1 of tags 7 and 8; call 0 of tag 8 waits for peers 1 and 3's OpDone
  CHECK(c.done(idOf(1), 0, OpDone{8, 0}).empty());
  CHECK(c.done(idOf(3), 0, OpDone{8, 0}).empty());
  CHECK(c.pendingCount() == 2);  // tag 7 call 1, tag 8 call 1
  CHECK(c.runningCount() == 0);

  // A call whose books survived its ring (the last OpDone lost) does not collide with the same (tag, call)
  // on the next ring.
  OpCoordinator d;
  for (uint8_t p = 1; p <= 3; ++p) CHECK(announce(d, p, ann(9)).empty());
  for (uint8_t p = 1; p <= 3; ++p) {
    CHECK(d.announce(idOf(p), 0, kThree, kEpoch + 1, Status::ok(), ann(9, 100, kEpoch + 1)).empty());
  }
  CHECK(d.runningCount() == 1);
  for (uint8_t p = 1; p <= 3; ++p) CHECK(d.done(idOf(p), 0, OpDone{9, 0}).empty());
  CHECK(d.runningCount() + d.pendingCount() == 0);
}

TEST_CASE("op coordinator: OpFailed from a member aborts it on every member, from anyone else nothing", "[ops]") {
  OpCoordinator c;
  CHECK(announce(c, 1, ann(7)).empty());
  CHECK(announce(c, 2, ann(7)).empty());
  CHECK(c.failed(idOf(9), 0, OpFailed{7, 0, static_cast<uint16_t>(Code::kTimeout), 0, "late"}).empty());
  auto aborted = sent<OpAbort>(c.failed(idOf(2), 0, OpFailed{7, 0, static_cast<uint16_t>(Code::kTimeout), 1, "late"}));
  REQUIRE(aborted.size() == 3);  // peer 3 has not called it yet: it fails the call when it comes
  CHECK(aborted[2].first == idOf(3));
  CHECK(aborted[2].second.code == static_cast<uint16_t>(Code::kTimeout));
  CHECK_THAT(aborted[2].second.reason, Catch::Contains(shortId(idOf(2))) && Catch::Contains("late"));
  CHECK(c.pendingCount() + c.runningCount() == 0);
}

TEST_CASE("op coordinator: different calls are Mismatch, naming both peers and values", "[ops]") {
  OpCoordinator c;
  CHECK(announce(c, 1, ann(7)).empty());
  CHECK(announce(c, 2, ann(7)).empty());
  auto aborted = sent<OpAbort>(announce(c, 3, ann(7, 101)));
  REQUIRE(aborted.size() == 3);
  for (const auto& [to, m] : aborted) {
    CHECK(m.code == static_cast<uint16_t>(Code::kMismatch));
    CHECK(m.seq == 0);
    CHECK_THAT(m.reason, Catch::Contains("count=101") && Catch::Contains(shortId(idOf(3))));
  }
  CHECK(c.pendingCount() == 0);
}

TEST_CASE("op coordinator: races with a ring change are TopologyChanged, not Mismatch", "[ops]") {
  OpCoordinator c;
  SECTION("a peer an epoch behind") {
    CHECK(announce(c, 1, ann(7)).empty());
    auto aborted = sent<OpAbort>(announce(c, 2, ann(7, 100, kEpoch - 1)));
    REQUIRE(aborted.size() == 3);  // every member
    CHECK(aborted[0].second.code == static_cast<uint16_t>(Code::kTopologyChanged));
    CHECK_THAT(aborted[0].second.reason, Catch::Contains("epoch 3") && Catch::Contains("pcclUpdateTopology"));
  }
  SECTION("a vote starts while others announced") {
    CHECK(announce(c, 1, ann(7)).empty());
    CHECK(announce(c, 2, ann(8)).empty());
    auto aborted = sent<OpAbort>(c.voteStarted(idOf(3)));
    REQUIRE(aborted.size() == 6);  // two tags, three members each
    for (const auto& [to, m] : aborted) CHECK(m.code == static_cast<uint16_t>(Code::kTopologyChanged));
  }
  SECTION("the master says why no collective can run: its code is passed on") {
    auto aborted = sent<OpAbort>(announce(c, 1, ann(7), Status::topologyChanged("a vote is open")));
    REQUIRE(aborted.size() == 3);
    CHECK(aborted[0].second.code == static_cast<uint16_t>(Code::kTopologyChanged));
    CHECK_THAT(aborted[0].second.reason, Catch::Contains("a vote is open"));
  }
  CHECK(c.pendingCount() == 0);
}

TEST_CASE("op coordinator: a blocked run says why before it says that a peer is an epoch behind", "[ops]") {
  // After a failed ring build the master is an epoch ahead of every peer; the build's failure is the news.
  OpCoordinator c;
  const Status stale = Status::peerLost("the ring build of epoch 4 failed: ring successor 03030303 at 10.0.0.3:29500: "
                                        "Connection refused; every peer must call pcclUpdateTopology first");
  auto aborted = sent<OpAbort>(announce(c, 1, ann(7, 100, kEpoch - 1), stale));
  REQUIRE(aborted.size() == 3);
  CHECK(aborted[0].second.code == static_cast<uint16_t>(Code::kPeerLost));
  CHECK_THAT(aborted[0].second.reason, Catch::Contains("10.0.0.3:29500") && Catch::StartsWith("tag 7: "));
}

// ---- tags that diverge ------------------------------------------------------------------------------

TEST_CASE("tag divergence: members waiting in different tags cross, a member in no tag never does", "[ops]") {
  const Uuid a = idOf(1), b = idOf(2), c = idOf(3);
  SECTION("a waits in 10 for b, b waits in 0 for a") {
    auto crossed = findCrossedTags({{0, {b}}, {10, {a}}}, kThree);
    REQUIRE(crossed.size() == 2);
    const CrossedTag& t10 = crossed[1];
    CHECK(t10.tag == 10);
    REQUIRE(t10.missing.size() == 2);  // b and c
    CHECK(t10.missing[0].peer == b);
    CHECK(t10.missing[0].waiting);
    CHECK(t10.missing[0].waits_in == 0);
    CHECK(t10.missing[0].not_called_by == a);
    CHECK(t10.missing[1].peer == c);
    CHECK_FALSE(t10.missing[1].waiting);  // c waits in no tag: only slow
    const std::string why = pccl::master::describeCrossedTag(t10, {a}, kThree);
    CHECK(why == "tag 10 was called by peer " + shortId(a) + " (rank 0) but not by peer " + shortId(b) +
                     " (rank 1, waiting in tag 0, which " + shortId(a) + " did not call) and peer " + shortId(c) +
                     " (rank 2)");
  }
  SECTION("a straggler that is still computing crosses nothing") {
    CHECK(findCrossedTags({{5, {a, b}}}, kThree).empty());
  }
  SECTION("asynchronous calls in the same order never cross, however far apart") {
    CHECK(findCrossedTags({{1, {a, b}}, {2, {a, b}}, {3, {a}}}, kThree).empty());
  }
  SECTION("the same calls in another order cross until each member has called both") {
    CHECK(findCrossedTags({{1, {a}}, {2, {b}}}, {a, b}).size() == 2);
    CHECK(findCrossedTags({{1, {a}}, {2, {a, b}}}, {a, b}).empty());
  }
}

TEST_CASE("op coordinator: a crossed tag fails with Mismatch after the window, naming who is missing", "[ops]") {
  const Millis window(30000);
  OpCoordinator c(4096, window);
  const TimePoint t0 = TimePoint() + std::chrono::hours(1);  // a fake clock: only differences matter
  // Peers 1 and 2 call tag 10; peer 3 (a late joiner's counter) calls tag 0.
  CHECK(announce(c, 1, ann(10)).empty());
  CHECK(announce(c, 2, ann(10)).empty());
  CHECK(announce(c, 3, ann(0)).empty());
  CHECK(c.tick(t0).empty());                       // the crossing is noticed: the window starts
  CHECK(c.tick(t0 + window - Millis(1)).empty());  // not yet
  Effects fx = c.tick(t0 + window);
  auto aborted = sent<OpAbort>(fx);
  REQUIRE(aborted.size() == 6);  // both tags, on every member
  for (const auto& [to, m] : aborted) {
    INFO(m.reason);
    CHECK(m.code == static_cast<uint16_t>(Code::kMismatch));
    CHECK(m.seq == 0);
    CHECK_THAT(m.reason, Catch::StartsWith("tags diverge: tag " + std::to_string(m.tag)) &&
                             Catch::Contains("announce_window_ms 30000") && Catch::Contains("for 30000 ms"));
    if (m.tag == 0) {
      CHECK(m.tag == 0);
      CHECK_THAT(m.reason, Catch::Contains("peer " + shortId(idOf(1)) + " (rank 0, waiting in tag 10") &&
                               Catch::Contains("peer " + shortId(idOf(2)) + " (rank 1, waiting in tag 10"));
    } else {
      CHECK(m.tag == 10);
      CHECK_THAT(m.reason, Catch::Contains("but not by peer " + shortId(idOf(3)) + " (rank 2, waiting in tag 0"));
    }
  }
  CHECK(c.pendingCount() == 0);
  CHECK(c.tick(t0 + 2 * window).empty());
}

TEST_CASE("op coordinator: a slow member is never failed by the window, and a crossing that resolves resets it",
          "[ops]") {
  const Millis window(1000);
  OpCoordinator c(4096, window);
  const TimePoint t0 = TimePoint() + std::chrono::hours(1);
  SECTION("a straggler still computing") {
    CHECK(announce(c, 1, ann(5)).empty());
    CHECK(announce(c, 2, ann(5)).empty());
    for (int i = 0; i < 10; ++i) CHECK(c.tick(t0 + i * window).empty());
    CHECK(announce(c, 3, ann(5)).empty());  // it arrives: every member has called it
    CHECK(c.runningCount() == 1);
  }
  SECTION("asynchronous calls in different orders") {
    CHECK(announce(c, 1, ann(1)).empty());
    CHECK(announce(c, 2, ann(2)).empty());
    CHECK(c.tick(t0).empty());  // crossed: 1 has 1, 2 has 2
    CHECK(announce(c, 1, ann(2)).empty());
    CHECK(announce(c, 3, ann(2)).empty());         // tag 2 is called by all; tag 1 waits only for slow members
    CHECK(c.tick(t0 + window / 2).empty());        // no longer crossed: the window is reset
    CHECK(c.tick(t0 + 10 * window).empty());
    CHECK(announce(c, 2, ann(1)).empty());
    CHECK(announce(c, 3, ann(1)).empty());
    CHECK(c.pendingCount() == 0);
  }
  SECTION("window 0 turns the check off") {
    OpCoordinator off(4096, Millis(0));
    CHECK(off.announce(idOf(1), 0, kThree, kEpoch, Status::ok(), ann(10)).empty());
    CHECK(off.announce(idOf(3), 0, kThree, kEpoch, Status::ok(), ann(0)).empty());
    CHECK(off.tick(t0).empty());
    CHECK(off.tick(t0 + std::chrono::hours(24)).empty());
    CHECK(off.pendingCount() == 2);
  }
}

TEST_CASE("op coordinator: divergence is judged per group", "[ops]") {
  const Millis window(1000);
  OpCoordinator c(4096, window);
  const TimePoint t0 = TimePoint() + std::chrono::hours(1);
  const std::vector<Uuid> g0 = {idOf(1), idOf(2)}, g1 = {idOf(3), idOf(4)};
  // Group 0 waits in tag 1, group 1 in tag 2: different groups never wait for each other.
  CHECK(c.announce(idOf(1), 0, g0, kEpoch, Status::ok(), ann(1)).empty());
  CHECK(c.announce(idOf(3), 1, g1, kEpoch, Status::ok(), ann(2)).empty());
  CHECK(c.tick(t0).empty());
  CHECK(c.tick(t0 + 5 * window).empty());
  CHECK(c.pendingCount() == 2);
}

// ---- operations in doubt ----------------------------------------------------------------------------

namespace {
OpState st(uint64_t tag, OpPhase phase, uint32_t seq = 0) {
  return OpState{kEpoch, tag, seq, static_cast<uint8_t>(phase)};
}
}  // namespace

TEST_CASE("op resolver: a peer in doubt makes the master ask every peer, and all prepared is a commit", "[ops]") {
  OpResolver r;
  bool failed = false;
  auto queries = sent<OpQuery>(r.state(idOf(1), 0, st(7, OpPhase::kPrepared), kThree, &failed));
  REQUIRE(queries.size() == 2);  // the others
  CHECK(queries[0].first == idOf(2));
  CHECK(queries[0].second.tag == 7);
  CHECK(sent<OpOutcome>(r.state(idOf(2), 0, st(7, OpPhase::kCommitted), kThree, &failed)).empty());
  auto outcome = sent<OpOutcome>(r.state(idOf(3), 0, st(7, OpPhase::kPrepared), kThree, &failed));
  REQUIRE(outcome.size() == 3);
  CHECK(outcome[0].second.committed == 1);
  CHECK_FALSE(failed);
  CHECK(r.openCount() == 0);
  // A late asker hears the same.
  auto late = sent<OpOutcome>(r.state(idOf(2), 0, st(7, OpPhase::kPrepared), kThree, &failed));
  REQUIRE(late.size() == 1);
  CHECK(late[0].second.committed == 1);
}

TEST_CASE("op resolver: one peer that failed it (or was still waiting for data) fails it everywhere", "[ops]") {
  OpResolver r;
  bool failed = false;
  (void)r.state(idOf(1), 0, st(7, OpPhase::kPrepared), kThree, &failed);
  (void)r.state(idOf(2), 0, st(7, OpPhase::kFailed), kThree, &failed);
  auto outcome = sent<OpOutcome>(r.state(idOf(3), 0, st(7, OpPhase::kUnknown), kThree, &failed));
  REQUIRE(outcome.size() == 3);
  CHECK(outcome[0].second.committed == 0);
  CHECK(outcome[0].second.code == static_cast<uint16_t>(Code::kPeerLost));
  CHECK_THAT(outcome[0].second.reason, Catch::Contains(shortId(idOf(2))) && Catch::Contains("pcclUpdateTopology"));
  CHECK(failed);
}

TEST_CASE("op resolver: a peer that leaves is not waited for, and the survivors all hold the result", "[ops]") {
  OpResolver r;
  bool failed = false;
  (void)r.state(idOf(1), 0, st(7, OpPhase::kPrepared), kThree, &failed);
  (void)r.state(idOf(2), 0, st(7, OpPhase::kPrepared), kThree, &failed);
  auto outcome = sent<OpOutcome>(r.peerGone(idOf(3), &failed));
  REQUIRE(outcome.size() == 2);
  CHECK(outcome[0].second.committed == 1);
  CHECK_FALSE(failed);
}

TEST_CASE("op resolver: a peer in doubt that asks again gets the peers not yet heard from asked again", "[ops]") {
  // A query lost with a connection (its peer came back on a new one) costs a round, not the operation.
  OpResolver r;
  bool failed = false;
  REQUIRE(sent<OpQuery>(r.state(idOf(1), 0, st(7, OpPhase::kPrepared), kThree, &failed)).size() == 2);
  CHECK(sent<OpOutcome>(r.state(idOf(2), 0, st(7, OpPhase::kPrepared), kThree, &failed)).empty());
  auto again = sent<OpQuery>(r.state(idOf(1), 0, st(7, OpPhase::kPrepared), kThree, &failed));
  REQUIRE(again.size() == 1);
  CHECK(again[0].first == idOf(3));
  CHECK(again[0].second.tag == 7);
  auto outcome = sent<OpOutcome>(r.state(idOf(3), 0, st(7, OpPhase::kPrepared), kThree, &failed));
  REQUIRE(outcome.size() == 3);
  CHECK(outcome[0].second.committed == 1);
  // Its answer lost too: asking again after the decision repeats the outcome to the asker.
  auto late = sent<OpOutcome>(r.state(idOf(1), 0, st(7, OpPhase::kPrepared), kThree, &failed));
  REQUIRE(late.size() == 1);
  CHECK(late[0].first == idOf(1));
}
