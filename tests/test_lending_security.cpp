// Issue 32 §1: a member may not make a same-host peer read memory that is not the member's, by a lend
// offer reflected to its maker, replayed from another connection or aimed at planted bytes, or by a lent
// record outside the buffers of the operation it belongs to. Each case: what the peer must refuse, and
// that it reads nothing. The remote is driven by hand (lending_support.hpp).
#include <catch2/catch.hpp>

#include <unistd.h>

#include "lending_support.hpp"

using namespace pccl;
using namespace pccl::test;

// peer must refuse, and that it reads nothing.
TEST_CASE("lending: a reflected offer (the receiver's own, sent back) is declined, and nothing is read", "[lending][security]") {
  HandDriven victim;
  auto own = readFrame(victim.raw);  // the victim's offer: its token lies in the victim's own memory
  REQUIRE(own.first.flags == wire::kDataLendOffer);
  std::array<uint8_t, wire::kLendOfferSize> reflected{};
  std::copy(own.second.begin(), own.second.end(), reflected.begin());
  writeFrame(victim.raw, wire::kDataLendOffer, reflected);
  // What a reflection is for: records naming any address of the victim (here: a secret of its own).
  std::vector<uint8_t> secret(64 << 10, 0x5C);
  writeFrame(victim.raw, wire::kDataLendRegion, wire::encodeLendRegion(regionOf(secret)), 1, 1);
  writeFrame(victim.raw, wire::kDataLent, wire::encodeLendRecord({reinterpret_cast<uintptr_t>(secret.data()), 64u << 10}), 1, 1);
  REQUIRE(runUntil(victim.sp.io, [&] { return victim.sink.closed; }));
  CHECK_FALSE(victim.ch->borrowing());
  CHECK(victim.sink.why.code() == Code::kProtocolError);
  CHECK_THAT(victim.sink.why.message(), Catch::Contains("a lend region without an accepted offer"));
  CHECK(victim.sink.got.empty());
}

TEST_CASE("lending: an offer replayed from another connection, or naming planted bytes, is declined", "[lending][security]") {
  // Connection 1: a genuine offer (made for connection 1's session) that a member copies.
  HandDriven one;
  auto genuine = readFrame(one.raw);
  REQUIRE(genuine.first.flags == wire::kDataLendOffer);
  auto parsed = wire::decodeLendOffer(genuine.second.data(), genuine.second.size());
  REQUIRE(parsed.isOk());
  // On connection 1 it verifies (for the dialer's end of its session)...
  CHECK(net::probeLender(*parsed, one.session, net::LendRole::kDialer, nullptr).isOk());
  // ...but nowhere else: not for another session, not for the other end.
  CHECK_FALSE(net::probeLender(*parsed, randomSession(), net::LendRole::kDialer, nullptr).isOk());
  CHECK_FALSE(net::probeLender(*parsed, one.session, net::LendRole::kAcceptor, nullptr).isOk());

  // Connection 2: the copy is replayed as the acceptor's offer.
  HandDriven two;
  (void)readFrame(two.raw);
  std::array<uint8_t, wire::kLendOfferSize> replay{};
  std::copy(genuine.second.begin(), genuine.second.end(), replay.begin());
  writeFrame(two.raw, wire::kDataLendOffer, replay);
  writeFrame(two.raw, wire::kDataLent, wire::encodeLendRecord({parsed->token_addr, 16}), 1, 1);
  REQUIRE(runUntil(two.sp.io, [&] { return two.sink.closed; }));
  CHECK_FALSE(two.ch->borrowing());
  CHECK_THAT(two.sink.why.message(), Catch::Contains("without an accepted offer"));
  CHECK(two.sink.got.empty());

  // Connection 3: the right token for this connection, but in a buffer of this process that is no
  // lending slot (as if a member had sent those bytes as data): the own-process rule declines it.
  HandDriven three;
  (void)readFrame(three.raw);
  wire::LendOffer planted;
  planted.pid = static_cast<uint32_t>(::getpid());
  randombytes_buf(planted.nonce.data(), planted.nonce.size());
  const auto token = net::lendToken(three.session, net::LendRole::kAcceptor, planted.nonce);
  std::vector<uint8_t> buffer(token.begin(), token.end());
  planted.token_addr = reinterpret_cast<uintptr_t>(buffer.data());
  auto refused = net::probeLender(planted, three.session, net::LendRole::kAcceptor, nullptr);
  CHECK_THAT(refused.message(), Catch::Contains("no lending slot"));
  writeFrame(three.raw, wire::kDataLendOffer, wire::encodeLendOffer(planted));
  writeEmptyFrame(three.raw, wire::kDataLendRetire);
  REQUIRE(runUntil(three.sp.io, [&] { return three.sink.closed; }));
  CHECK_FALSE(three.ch->borrowing());
  CHECK_THAT(three.sink.why.message(), Catch::Contains("announced no region"));
}

TEST_CASE("lending: a lent record outside its operation's announced regions fails the link without a read",
          "[lending][security]") {
  const auto inside = pattern(96 << 10, 11);
  const auto other = pattern(64 << 10, 12);  // readable: a record there would deliver if it were read
  const uint64_t at = reinterpret_cast<uintptr_t>(other.data());
  const uint64_t end = reinterpret_cast<uintptr_t>(inside.data()) + inside.size();
  struct Case {
    const char* name;
    std::function<void(net::Tcp::socket&)> write;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"outside every region", [&](net::Tcp::socket& raw) {
         writeFrame(raw, wire::kDataLent, wire::encodeLendRecord({at, 32u << 10}), 4, 2);
       }, "outside the regions"},
      {"inside a region of another operation", [&](net::Tcp::socket& raw) {
         writeFrame(raw, wire::kDataLent, wire::encodeLendRecord({end - (32u << 10), 32u << 10}), 4, 3);
       }, "outside the regions"},
      {"one byte past the region", [&](net::Tcp::socket& raw) {
         writeFrame(raw, wire::kDataLent, wire::encodeLendRecord({end - (32u << 10), (32u << 10) + 1}), 4, 2);
       }, "outside the regions"},
      {"after the operation retired its regions", [&](net::Tcp::socket& raw) {
         const auto head = wire::encodeDataFrameHead([] {
           wire::DataHeader d = wire::dataHeader(4, 0, wire::kDataLendRetire, 0);
           d.seq = 2;
           return d;
         }(), kEpoch, 0);
         asio::write(raw, asio::buffer(head));
         writeFrame(raw, wire::kDataLent, wire::encodeLendRecord({end - (32u << 10), 32u << 10}), 4, 2);
       }, "outside the regions"},
      {"more regions than an operation has", [&](net::Tcp::socket& raw) {
         for (size_t i = 0; i < net::DataChannel::kMaxLendRegionsPerOp; ++i) {
           writeFrame(raw, wire::kDataLendRegion, wire::encodeLendRegion({at + i, 64}), 4, 2);
         }
       }, "more lend regions than"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      HandDriven hd;
      (void)readFrame(hd.raw);
      net::LendSlot slot;
      writeFrame(hd.raw, wire::kDataLendOffer,
                 wire::encodeLendOffer(net::makeLendOffer(hd.session, net::LendRole::kAcceptor, &slot)));
      REQUIRE(runUntil(hd.sp.io, [&] { return hd.ch->borrowing(); }));
      writeFrame(hd.raw, wire::kDataLendRegion, wire::encodeLendRegion(regionOf(inside)), 4, 2);
      // A record inside the region is read and delivered.
      const uint64_t in_at = reinterpret_cast<uintptr_t>(inside.data()) + 4096;
      writeFrame(hd.raw, wire::kDataLent, wire::encodeLendRecord({in_at, 32u << 10}), 4, 2);
      REQUIRE(runUntil(hd.sp.io, [&] { return hd.sink.got.size() == 1; }));
      CHECK(hd.sink.got[0].lent);
      CHECK((hd.sink.got[0].bytes == std::vector<uint8_t>(inside.begin() + 4096, inside.begin() + 4096 + (32 << 10))));
      c.write(hd.raw);
      REQUIRE(runUntil(hd.sp.io, [&] { return hd.sink.closed; }));
      CHECK(hd.sink.why.code() == Code::kProtocolError);
      CHECK_THAT(hd.sink.why.message(), Catch::Contains(c.error));
      CHECK(hd.sink.got.size() == 1);  // nothing more delivered: the record was refused, not read
    }
  }
}
