// The commit round (collective/commit_round.hpp) and the book of early frames (collective/op_book.hpp)
// on their own: a ring of N simulated peers passing streak messages in synchronous rounds (one round =
// one one-way delay), and frames kept for calls not made yet.
#include <catch2/catch.hpp>

#include <vector>

#include "collective/commit_round.hpp"
#include "collective/op_book.hpp"

using namespace pccl;
using pccl::collective::CommitRound;
using pccl::collective::EarlyFrames;
using pccl::collective::OpHistory;
using pccl::collective::OpKey;

namespace {

// Message in flight: to peer `to`, from its predecessor (`from_pred`) or successor, a streak or a commit.
struct Msg {
  uint32_t to;
  bool from_pred;
  uint32_t streak;
  bool commit;
};

// Peers in `prepared` become prepared at round 0; the others never do. Returns, per peer, the round it
// committed in (-1: never).
std::vector<int> run(uint32_t n, const std::vector<bool>& prepared, int max_rounds = 64) {
  std::vector<CommitRound> peers(n, CommitRound(n));
  std::vector<int> committed(n, -1);
  std::vector<Msg> next;
  auto send = [&](uint32_t from, const CommitRound::Sends& s) {
    const uint32_t succ = (from + 1) % n, pred = (from + n - 1) % n;
    if (s.commit) {
      next.push_back({succ, true, 0, true});
      next.push_back({pred, false, 0, true});
      return;
    }
    if (s.to_successor != 0) next.push_back({succ, true, s.to_successor, false});
    if (s.to_predecessor != 0) next.push_back({pred, false, s.to_predecessor, false});
  };
  for (uint32_t i = 0; i < n; ++i) {
    if (!prepared[i]) continue;
    send(i, peers[i].prepared());
    if (peers[i].isCommitted()) committed[i] = 0;
  }
  for (int round = 1; round <= max_rounds && !next.empty(); ++round) {
    std::vector<Msg> now = std::move(next);
    next.clear();
    for (const Msg& m : now) {
      CommitRound& p = peers[m.to];
      if (m.commit && !p.isPrepared()) FAIL("a commit reached a peer that was not prepared");
      CommitRound::Sends s = m.commit ? p.commitReceived()
                                      : (m.from_pred ? p.fromPredecessor(m.streak) : p.fromSuccessor(m.streak));
      send(m.to, s);
      if (p.isCommitted() && committed[m.to] < 0) committed[m.to] = round;
    }
  }
  return committed;
}

}  // namespace

TEST_CASE("commit round: every peer prepared at once commits within ceil((N-1)/2) one-way delays", "[commit]") {
  for (uint32_t n = 2; n <= 12; ++n) {
    INFO("N = " << n);
    auto rounds = run(n, std::vector<bool>(n, true));
    for (int r : rounds) {
      CHECK(r >= 0);
      CHECK(r <= static_cast<int>((n - 1 + 1) / 2));
    }
  }
}

TEST_CASE("commit round: one peer that is never prepared keeps every peer from committing", "[commit]") {
  for (uint32_t n = 2; n <= 9; ++n) {
    for (uint32_t missing = 0; missing < n; ++missing) {
      std::vector<bool> prepared(n, true);
      prepared[missing] = false;
      auto rounds = run(n, prepared);
      for (int r : rounds) CHECK(r == -1);
    }
  }
}

TEST_CASE("commit round: a peer that commits tells both neighbours, and a late one commits on hearing it", "[commit]") {
  CommitRound a(3);
  CHECK_FALSE(a.prepared().commit);
  CHECK_FALSE(a.fromPredecessor(1).commit);
  const CommitRound::Sends s = a.fromSuccessor(1);  // behind 1 + ahead 1 + itself = 3
  CHECK(s.commit);
  CHECK(a.isCommitted());
  CHECK_FALSE(a.fromSuccessor(2).commit);  // nothing more to say
  CommitRound b(3);
  b.prepared();
  CHECK(b.commitReceived().commit);  // passes it on
  CHECK_FALSE(b.commitReceived().commit);
  CommitRound c(5);
  const CommitRound::Sends first = c.prepared();
  CHECK(first.to_successor == 1);
  CHECK(first.to_predecessor == 1);
  const CommitRound::Sends more = c.fromPredecessor(2);
  CHECK(more.to_successor == 3);    // the two behind, and itself
  CHECK(more.to_predecessor == 0);  // nothing new ahead
  CHECK(c.fromPredecessor(9).commit);  // clamped to N-1 = 4: with itself, all five
}

TEST_CASE("op book: frames of a call not made yet stay within the eager limit and are never freed while read",
          "[commit]") {
  EarlyFrames early;
  const OpKey k{3, 7, 0};
  const int ch1 = 0, ch2 = 0;
  wire::DataHeader h = wire::dataHeader(7, 0, 0, 0);
  auto a = early.add(k, h, wire::kEagerBytes / 2, &ch1);
  REQUIRE(a.isOk());
  CHECK(early.delivered(&ch1) == std::optional<OpKey>(k));
  auto b = early.add(k, h, wire::kEagerBytes / 2, &ch2);
  REQUIRE(b.isOk());
  CHECK(early.takeComplete(k).size() == 1);  // the one still being read stays
  CHECK(early.bytes() == wire::kEagerBytes / 2);
  CHECK(early.add(k, h, 1, &ch1).status().code() == Code::kProtocolError);  // past the limit
  early.drop(k);                           // the call ended while ch2 still reads into its buffer
  CHECK(early.bytes() == wire::kEagerBytes / 2);
  CHECK_FALSE(early.delivered(&ch2).has_value());  // read: now freed, and nobody hears of it
  CHECK(early.bytes() == 0);
  auto c = early.add(OpKey{3, 8, 0}, h, 100, &ch1);
  REQUIRE(c.isOk());
  early.channelClosed(&ch1);  // the read never finishes: freed with the channel
  CHECK(early.bytes() == 0);
  early.hello(k, wire::OpDesc{1, 2, 3, 4, 5, 6}, 1);
  early.hello(k, wire::OpDesc{1, 2, 3, 4, 5, 6}, 7);  // a two-level sender's
  auto hellos = early.takeHellos(k);
  REQUIRE(hellos.size() == 2);
  CHECK(hellos[0].first == 1);
  CHECK(hellos[0].second.count == 1);
  CHECK(hellos[1].first == 7);
  CHECK(early.takeHellos(k).empty());
  // Two-level: the eager limit holds per sender, so two senders may each send up to it.
  const OpKey k2{3, 9, 0};
  REQUIRE(early.add(k2, h, wire::kEagerBytes, &ch1, 1).isOk());
  REQUIRE(early.add(k2, h, wire::kEagerBytes, &ch2, 2).isOk());
  CHECK(early.add(k2, h, 1, &ch1, 1).status().code() == Code::kProtocolError);
  early.drop(k2);
  early.channelClosed(&ch1);
  early.channelClosed(&ch2);
  CHECK(early.bytes() == 0);
}

TEST_CASE("op book: the history keeps the latest outcomes", "[commit]") {
  OpHistory h(2);
  h.committed(OpKey{1, 1, 0});
  h.failed(OpKey{1, 1, 1}, Status::timeout("late"));
  CHECK(h.find(OpKey{1, 1, 0})->isOk());
  CHECK(h.find(OpKey{1, 1, 1})->code() == Code::kTimeout);
  h.committed(OpKey{1, 2, 0});
  CHECK_FALSE(h.find(OpKey{1, 1, 0}).has_value());
  CHECK_FALSE(h.find(OpKey{9, 9, 9}).has_value());
}
