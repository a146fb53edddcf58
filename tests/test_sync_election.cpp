// The master's shared-state election (master/sync_election.hpp) and the sync messages' limits:
// revision and majority rules, strategies, mismatched key sets, and hostile announcements.
#include <catch2/catch.hpp>

#include "master/sync_election.hpp"
#include "wire/frame.hpp"

using namespace pccl;
using namespace pccl::wire;
using pccl::master::electSharedState;
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

TEST_CASE("sync election: majority per key at the top revision; ties go to the smallest digest", "[sync]") {
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
  CHECK(e.plans[2].status.code() == Code::kMismatch);
  CHECK_THAT(e.plans[2].status.message(), Catch::Contains("'w' has 101 elements"));
  CHECK(e.plans[3].status.code() == Code::kMismatch);
  CHECK_THAT(e.plans[3].status.message(), Catch::Contains("'m' has dtype 11"));
  CHECK(e.plans[4].status.code() == Code::kMismatch);
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
  plan.fetches.push_back(SyncFetch{0, {}});  // a key with no source
  std::vector<uint8_t> p;
  ByteWriter pw(&p);
  plan.encode(pw);
  ByteReader pr(p.data(), p.size());
  CHECK(SyncPlan::decode(pr).status().code() == Code::kProtocolError);
}
