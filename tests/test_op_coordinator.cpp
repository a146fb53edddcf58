// The master's agreement on collectives (master/op_coordinator.hpp) on its own: announcements in,
// OpStart/OpAbort out, no sockets and no clock.
#include <catch2/catch.hpp>

#include "master/op_coordinator.hpp"
#include "wire/frame.hpp"

using namespace pccl;
using namespace pccl::wire;
using pccl::master::Effects;
using pccl::master::OpCoordinator;

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

TEST_CASE("op coordinator: equal announcements start the operation on every member", "[ops]") {
  OpCoordinator c;
  CHECK(announce(c, 1, ann(7)).empty());
  CHECK(announce(c, 3, ann(7)).empty());
  auto started = sent<OpStart>(announce(c, 2, ann(7)));
  REQUIRE(started.size() == 3);
  CHECK(started[0].second.tag == 7);
  CHECK(started[0].second.op_id != 0);
  CHECK(c.pendingCount() == 0);
  CHECK(c.runningCount() == 1);
}

TEST_CASE("op coordinator: different calls are Mismatch, naming both peers and values", "[ops]") {
  OpCoordinator c;
  CHECK(announce(c, 1, ann(7)).empty());
  CHECK(announce(c, 2, ann(7)).empty());
  auto aborted = sent<OpAbort>(announce(c, 3, ann(7, 101)));
  REQUIRE(aborted.size() == 3);
  for (const auto& [to, m] : aborted) {
    CHECK(m.code == static_cast<uint16_t>(Code::kMismatch));
    CHECK(m.op_id == 0);
    CHECK_THAT(m.reason, Catch::Contains("count=101") && Catch::Contains(shortId(idOf(3))));
  }
  CHECK(c.pendingCount() == 0);
}

TEST_CASE("op coordinator: races with a ring change are TopologyChanged, not Mismatch", "[ops]") {
  OpCoordinator c;
  SECTION("a peer an epoch behind") {
    CHECK(announce(c, 1, ann(7)).empty());
    auto aborted = sent<OpAbort>(announce(c, 2, ann(7, 100, kEpoch - 1)));
    REQUIRE(aborted.size() == 2);  // everyone who announced
    CHECK(aborted[0].second.code == static_cast<uint16_t>(Code::kTopologyChanged));
    CHECK_THAT(aborted[0].second.reason, Catch::Contains("epoch 3") && Catch::Contains("pcclUpdateTopology"));
  }
  SECTION("a vote starts while others announced") {
    CHECK(announce(c, 1, ann(7)).empty());
    CHECK(announce(c, 2, ann(8)).empty());
    auto aborted = sent<OpAbort>(c.voteStarted(idOf(3)));
    REQUIRE(aborted.size() == 2);
    for (const auto& [to, m] : aborted) CHECK(m.code == static_cast<uint16_t>(Code::kTopologyChanged));
  }
  SECTION("the master says why no collective can run: its code is passed on") {
    auto aborted = sent<OpAbort>(announce(c, 1, ann(7), Status::topologyChanged("a vote is open")));
    REQUIRE(aborted.size() == 1);
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
  REQUIRE(aborted.size() == 1);
  CHECK(aborted[0].second.code == static_cast<uint16_t>(Code::kPeerLost));
  CHECK_THAT(aborted[0].second.reason, Catch::Contains("10.0.0.3:29500") && Catch::StartsWith("tag 7: "));
}
