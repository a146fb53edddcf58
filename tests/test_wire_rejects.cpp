// The wire layer in isolation, malformed input: truncated headers, wrong magic and version, oversized
// lengths, every strict prefix and trailing bytes of every payload, strings past their limits, counts
// beyond their bytes, all rejected without large allocations.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "alloc_watch.hpp"
#include "wire_samples.hpp"

using namespace pccl;
using namespace pccl::wire;
using namespace pccl::wire::samples;
using pccl::test::AllocWatch;

// ---- header rejections ------------------------------------------------------------------------

TEST_CASE("wire: truncated headers are rejected at every length") {
  const std::vector<uint8_t> frame = encodeFrame(sample(Tag<P2PHello>{}), 5);
  for (size_t n = 0; n < kHeaderSize; ++n) {
    INFO("length " << n);
    const std::vector<uint8_t> prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(n));
    auto h = decodeHeader(prefix.data(), prefix.size(), kMaxControlPayload);
    REQUIRE_FALSE(h.isOk());
    CHECK(h.status().code() == Code::kProtocolError);
    CHECK(contains(h.status().message(), "truncated"));
  }
  // Exactly the header is enough; more bytes than the header are not looked at.
  CHECK(decodeHeader(frame.data(), kHeaderSize, kMaxControlPayload).isOk());
  CHECK(decodeHeader(frame.data(), frame.size(), kMaxControlPayload).isOk());
}

TEST_CASE("wire: wrong magic is a protocol error") {
  const HeaderBytes good = encodeHeader(FrameHeader{});
  for (size_t i = 0; i < 4; ++i) {
    HeaderBytes b = good;
    b[i] ^= 0x20;  // "pCCL", "PcCL", ...
    auto h = decodeHeader(b.data(), b.size(), kMaxControlPayload);
    INFO("byte " << i);
    REQUIRE_FALSE(h.isOk());
    CHECK(h.status().code() == Code::kProtocolError);
    CHECK(contains(h.status().message(), "magic"));
  }
  HeaderBytes zero{};
  auto hz = decodeHeader(zero.data(), zero.size(), kMaxControlPayload);
  REQUIRE_FALSE(hz.isOk());
  CHECK(hz.status().code() == Code::kProtocolError);

  // Big-endian magic ("LCCP") is not accepted.
  HeaderBytes be = good;
  std::reverse(be.begin(), be.begin() + 4);
  auto hb = decodeHeader(be.data(), be.size(), kMaxControlPayload);
  REQUIRE_FALSE(hb.isOk());
  CHECK(hb.status().code() == Code::kProtocolError);

  // An HTTP request is not a pccl peer.
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n";
  auto hh = decodeHeader(reinterpret_cast<const uint8_t*>(http.data()), http.size(), kMaxControlPayload);
  REQUIRE_FALSE(hh.isOk());
  CHECK(hh.status().code() == Code::kProtocolError);

  // Bad magic wins over a bad version.
  HeaderBytes both = good;
  both[0] = 'X';
  both[4] = 9;
  auto h2 = decodeHeader(both.data(), both.size(), kMaxControlPayload);
  REQUIRE_FALSE(h2.isOk());
  CHECK(h2.status().code() == Code::kProtocolError);
}

TEST_CASE("wire: wrong version is a version mismatch naming both versions") {
  // Version 2 is the previous protocol (before the ephemeral key exchange of §6).
  for (uint16_t v : {uint16_t{0}, uint16_t{1}, uint16_t{2}, uint16_t{kProtocolVersion + 1}, uint16_t{6}, uint16_t{258},
                     uint16_t{0xFFFF}}) {
    FrameHeader fh;
    fh.version = v;
    fh.type = static_cast<uint16_t>(MsgType::kHello);
    const HeaderBytes b = encodeHeader(fh);
    auto h = decodeHeader(b.data(), b.size(), kMaxHandshakePayload);
    INFO("version " << v << ": " << h.status().toString());
    REQUIRE_FALSE(h.isOk());
    CHECK(h.status().code() == Code::kVersionMismatch);
    CHECK(contains(h.status().message(), "version " + std::to_string(v)));
    CHECK(contains(h.status().message(), "version " + std::to_string(kProtocolVersion)));
  }
  // A peer with another version is reported as such even if its length exceeds our limit.
  FrameHeader fh;
  fh.version = kProtocolVersion + 1;
  fh.length = 0xFFFFFFFFu;
  const HeaderBytes b = encodeHeader(fh);
  auto h = decodeHeader(b.data(), b.size(), kMaxHandshakePayload);
  REQUIRE_FALSE(h.isOk());
  CHECK(h.status().code() == Code::kVersionMismatch);
}

TEST_CASE("wire: payload length above the limit is rejected by the header alone") {
  for (uint32_t limit : {uint32_t{0}, kMaxHandshakePayload, kMaxControlPayload}) {
    for (uint32_t len : {limit + 1, limit + 2, 0x7FFFFFFFu, 0xFFFFFFFFu}) {
      FrameHeader fh;
      fh.type = static_cast<uint16_t>(MsgType::kTopologyUpdate);
      fh.length = len;
      const HeaderBytes b = encodeHeader(fh);
      INFO("limit " << limit << " length " << len);
      AllocWatch watch;
      auto h = decodeHeader(b.data(), b.size(), limit);
      const size_t biggest = watch.maxSoFar();
      REQUIRE_FALSE(h.isOk());
      CHECK(h.status().code() == Code::kProtocolError);
      CHECK(contains(h.status().message(), std::to_string(len)));
      CHECK(contains(h.status().message(), std::to_string(limit)));
      CHECK(biggest < 4096);  // only the message string, never a payload-sized buffer
    }
    FrameHeader at;
    at.length = limit;
    const HeaderBytes b = encodeHeader(at);
    auto h = decodeHeader(b.data(), b.size(), limit);
    REQUIRE(h.isOk());
    CHECK(h->length == limit);
  }
}

// ---- payload rejections -----------------------------------------------------------------------

TEST_CASE("wire: every strict prefix of every payload is rejected") {
  forEachMessage([](auto tag) {
    using M = typename decltype(tag)::type;
    const std::vector<uint8_t> full = payloadOf(sample(tag));
    INFO("message " << msgTypeName(static_cast<uint16_t>(M::kType)) << " of " << full.size() << " bytes");
    if constexpr (isEmptyMessage<M>()) {
      CHECK(full.empty());
    } else {
      CHECK_FALSE(full.empty());
    }
    size_t accepted = 0;
    size_t wrong_code = 0;
    size_t no_context = 0;
    for (size_t n = 0; n < full.size(); ++n) {
      const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
      auto m = decodePayload<M>(prefix.data(), prefix.size());
      if (m.isOk()) {
        ++accepted;
        continue;
      }
      if (m.status().code() != Code::kProtocolError) ++wrong_code;
      if (m.status().message().rfind(msgTypeName(static_cast<uint16_t>(M::kType)), 0) != 0) ++no_context;
    }
    CHECK(accepted == 0);
    CHECK(wrong_code == 0);
    CHECK(no_context == 0);
    // The full payload itself is accepted.
    CHECK(decodePayload<M>(full.data(), full.size()).isOk());
  });
}

TEST_CASE("wire: trailing bytes are rejected for every message type") {
  forEachMessage([](auto tag) {
    using M = typename decltype(tag)::type;
    INFO("message " << msgTypeName(static_cast<uint16_t>(M::kType)));
    for (size_t extra : {size_t{1}, size_t{2}, size_t{64}}) {
      std::vector<uint8_t> p = payloadOf(sample(tag));
      p.insert(p.end(), extra, 0x00);
      auto m = decodePayload<M>(p.data(), p.size());
      INFO("extra " << extra);
      REQUIRE_FALSE(m.isOk());
      CHECK(m.status().code() == Code::kProtocolError);
      CHECK(contains(m.status().message(), "trailing"));
      CHECK(contains(m.status().message(), msgTypeName(static_cast<uint16_t>(M::kType))));
    }
  });
}

TEST_CASE("wire: strings longer than their limits are rejected") {
  auto rejected = [](auto result) {
    INFO(result.status().toString());
    CHECK_FALSE(result.isOk());
    CHECK(result.status().code() == Code::kProtocolError);
    return contains(result.status().message(), "exceeds limit");
  };
  SECTION("JoinRequest advertise_host above 255") {
    JoinRequest m = sample(Tag<JoinRequest>{});
    m.advertise_host = std::string(256, 'a');
    const std::vector<uint8_t> p = payloadOf(m);
    CHECK(rejected(decodePayload<JoinRequest>(p.data(), p.size())));
  }
  SECTION("JoinRequest client_version above 64") {
    JoinRequest m = sample(Tag<JoinRequest>{});
    m.client_version = std::string(65, 'v');
    const std::vector<uint8_t> p = payloadOf(m);
    CHECK(rejected(decodePayload<JoinRequest>(p.data(), p.size())));
  }
  SECTION("JoinRequest and member levels above 2 (protocol 12)") {
    JoinRequest m = sample(Tag<JoinRequest>{});
    m.levels = 3;
    std::vector<uint8_t> p = payloadOf(m);
    CHECK_THAT(decodePayload<JoinRequest>(p.data(), p.size()).status().message(), Catch::Contains("levels 3 unknown"));
    TopologyUpdate t;
    t.ring.push_back(MemberInfo{});
    t.ring[0].levels = 9;
    p = payloadOf(t);
    CHECK(decodePayload<TopologyUpdate>(p.data(), p.size()).status().code() == Code::kProtocolError);
  }
  SECTION("JoinRequest region and ring_region above 64 (protocol 11)") {
    JoinRequest m = sample(Tag<JoinRequest>{});
    m.region = std::string(kMaxRegion + 1, 'r');
    std::vector<uint8_t> p = payloadOf(m);
    CHECK(rejected(decodePayload<JoinRequest>(p.data(), p.size())));
    m = sample(Tag<JoinRequest>{});
    m.ring_region = std::string(kMaxRegion + 1, 'r');
    p = payloadOf(m);
    CHECK(rejected(decodePayload<JoinRequest>(p.data(), p.size())));
  }
  SECTION("TopologyUpdate member region above 64 (protocol 11)") {
    TopologyUpdate m = sample(Tag<TopologyUpdate>{});
    m.ring[1].region = std::string(kMaxRegion + 1, 'r');
    const std::vector<uint8_t> p = payloadOf(m);
    CHECK(rejected(decodePayload<TopologyUpdate>(p.data(), p.size())));
  }
  SECTION("TopologyUpdate member host above 255") {
    TopologyUpdate m = sample(Tag<TopologyUpdate>{});
    m.ring[2].host = std::string(256, 'h');
    const std::vector<uint8_t> p = payloadOf(m);
    CHECK(rejected(decodePayload<TopologyUpdate>(p.data(), p.size())));
  }
  SECTION("Error, TopologyFailed, P2PFailed, PeerLeft strings above 4096") {
    std::vector<uint8_t> err = {0x01, 0x00};
    rawStr(&err, ByteReader::kMaxString + 1, 'e');
    CHECK(rejected(decodePayload<Error>(err.data(), err.size())));

    std::vector<uint8_t> tf(10, 0x00);
    rawStr(&tf, ByteReader::kMaxString + 1, 'r');
    CHECK(rejected(decodePayload<TopologyFailed>(tf.data(), tf.size())));
    CHECK(rejected(decodePayload<P2PFailed>(tf.data(), tf.size())));

    std::vector<uint8_t> pl(17, 0x01);
    rawStr(&pl, 0xFFFF, 'd');
    CHECK(rejected(decodePayload<PeerLeft>(pl.data(), pl.size())));

    // Exactly at the limit is fine.
    std::vector<uint8_t> ok = {0x01, 0x00};
    rawStr(&ok, ByteReader::kMaxString, 'e');
    auto e = decodePayload<Error>(ok.data(), ok.size());
    REQUIRE(e.isOk());
    CHECK(e->message.size() == ByteReader::kMaxString);
  }
  SECTION("a string length that runs past the payload is truncation, not a read overrun") {
    std::vector<uint8_t> p = {0x01, 0x00, 0x10, 0x00, 'a', 'b'};  // claims 16, holds 2
    auto e = decodePayload<Error>(p.data(), p.size());
    REQUIRE_FALSE(e.isOk());
    CHECK(e.status().code() == Code::kProtocolError);
    CHECK(contains(e.status().message(), "truncated"));
  }
  SECTION("the writer clamps strings to kMaxString so its frames stay decodable") {
    std::vector<uint8_t> v;
    ByteWriter w(&v);
    w.str(std::string(5000, 'x'));
    CHECK(v.size() == 2 + ByteReader::kMaxString);
    ByteReader r(v.data(), v.size());
    std::string out;
    REQUIRE(r.str(&out).isOk());
    CHECK(out == std::string(ByteReader::kMaxString, 'x'));
  }
  SECTION("Error text is cut to kMaxErrorText") {
    Error m;
    m.code = 1;
    m.message = std::string(5000, 'x');
    const std::vector<uint8_t> p = payloadOf(m);
    CHECK(p.size() == 2 + 2 + kMaxErrorText);
    auto e = decodePayload<Error>(p.data(), p.size());
    REQUIRE(e.isOk());
    CHECK(e->message == std::string(kMaxErrorText, 'x'));
  }
}

TEST_CASE("wire: a region with a byte outside [A-Za-z0-9._-] is refused in every message that carries one") {
  for (const std::string& bad : {std::string("eu west"), std::string("eu/west"), std::string("a\x01"),
                                 std::string("\x7f"), std::string("r\xC3\xA9gion"), std::string(1, '\0'),
                                 std::string("a:b"), std::string("a\n")}) {
    INFO("region '" << bad << "'");
    CHECK_FALSE(isValidRegion(bad));
    JoinRequest j = sample(Tag<JoinRequest>{});
    j.region = bad;
    std::vector<uint8_t> p = payloadOf(j);
    auto rj = decodePayload<JoinRequest>(p.data(), p.size());
    CHECK(rj.status().code() == Code::kProtocolError);
    CHECK(contains(rj.status().message(), "JoinRequest region has a character outside [A-Za-z0-9._-]"));
    j = sample(Tag<JoinRequest>{});
    j.ring_region = bad;
    p = payloadOf(j);
    CHECK(decodePayload<JoinRequest>(p.data(), p.size()).status().code() == Code::kProtocolError);
    TopologyUpdate t = sample(Tag<TopologyUpdate>{});
    t.ring[4].region = bad;
    p = payloadOf(t);
    auto rt = decodePayload<TopologyUpdate>(p.data(), p.size());
    CHECK(rt.status().code() == Code::kProtocolError);
    CHECK(contains(rt.status().message(), "member region"));
    ProbePlan plan = sample(Tag<ProbePlan>{});
    plan.source.region = bad;
    p = payloadOf(plan);
    CHECK(decodePayload<ProbePlan>(p.data(), p.size()).status().code() == Code::kProtocolError);
  }
  CHECK(isValidRegion(""));
  CHECK(isValidRegion("AZaz09._-"));
  CHECK(isValidRegion(std::string(kMaxRegion, 'x')));
  CHECK_FALSE(isValidRegion(std::string(kMaxRegion + 1, 'x')));
}

TEST_CASE("wire: inbound (protocol 20) is 0 or 1 in a JoinRequest and in every member, and relays are checked") {
  JoinRequest j = sample(Tag<JoinRequest>{});
  std::vector<uint8_t> p = payloadOf(j);
  p.back() = 2;
  auto rj = decodePayload<JoinRequest>(p.data(), p.size());
  CHECK(rj.status().code() == Code::kProtocolError);
  CHECK(contains(rj.status().message(), "JoinRequest inbound is 2 (0 or 1)"));
  TopologyUpdate t = sample(Tag<TopologyUpdate>{});
  t.ring.resize(1);
  p = payloadOf(t);
  const size_t at = p.size() - 17;  // inbound, then the relay's id
  REQUIRE(p[at] == t.ring[0].inbound);
  p[at] = 0xFF;
  auto rt = decodePayload<TopologyUpdate>(p.data(), p.size());
  CHECK(rt.status().code() == Code::kProtocolError);
  CHECK(contains(rt.status().message(), "member inbound is 255"));
  // A member named as its own relay.
  t.ring[0].relay = t.ring[0].id;
  p = payloadOf(t);
  rt = decodePayload<TopologyUpdate>(p.data(), p.size());
  CHECK(rt.status().code() == Code::kProtocolError);
  CHECK(contains(rt.status().message(), "relays its own ring link"));
  // A RelayHello from neither end of its link, or for a link from a member to itself.
  RelayHello rh = sample(Tag<RelayHello>{});
  rh.sender_id = pattern<16>(99);
  p = payloadOf(rh);
  CHECK(decodePayload<RelayHello>(p.data(), p.size()).status().code() == Code::kProtocolError);
  rh = sample(Tag<RelayHello>{});
  rh.to = rh.from;
  p = payloadOf(rh);
  CHECK(decodePayload<RelayHello>(p.data(), p.size()).status().code() == Code::kProtocolError);
}

namespace {
// A TopologyUpdate payload of one real, minimal member (92 bytes) whose count says `claimed` members.
std::vector<uint8_t> oneMemberClaiming(uint32_t claimed) {
  std::vector<uint8_t> p;
  ByteWriter w(&p);
  w.u64(1);
  w.u32(claimed);
  w.fixed(pattern<16>(1));
  w.str("");
  w.u16(1);
  w.u32(2);
  w.u32(3);
  w.u32(4);
  w.fixed(pattern<32>(5));
  w.str("");  // region (protocol 11)
  w.u8(1);    // levels (protocol 12): flat
  w.u64(0);   // two_level_bytes (protocol 14)
  w.u8(1);    // inbound (protocol 20)
  w.fixed(pattern<16>(9));  // relay (protocol 20)
  return p;
}
}  // namespace

TEST_CASE("wire: a TopologyUpdate member count beyond its bytes is rejected without allocating") {
  for (uint32_t claimed : {0xFFFFFFFFu, 0x10000000u, 1000000u, 2u}) {
    const std::vector<uint8_t> p = oneMemberClaiming(claimed);
    INFO("claimed " << claimed);
    AllocWatch watch;
    auto m = decodePayload<TopologyUpdate>(p.data(), p.size());
    const size_t biggest = watch.maxSoFar();
    REQUIRE_FALSE(m.isOk());
    CHECK(m.status().code() == Code::kProtocolError);
    CHECK(contains(m.status().message(), "cannot fit"));
    CHECK(biggest < 4096);
  }
  // The same bytes with a truthful count of one decode.
  const std::vector<uint8_t> p = oneMemberClaiming(1);
  auto m = decodePayload<TopologyUpdate>(p.data(), p.size());
  REQUIRE(m.isOk());
  REQUIRE(m->ring.size() == 1);
  CHECK(m->ring[0].port == 1);
  CHECK(m->ring[0].group == 2);
  CHECK(m->ring[0].connections == 3);
  CHECK(m->ring[0].host_connections == 4);

  // A count of many members over a large buffer of zero-length hosts is bounded by the bytes.
  std::vector<uint8_t> big;
  ByteWriter wb(&big);
  wb.u64(0);
  wb.u32(0xFFFFFFFFu);
  big.resize(big.size() + 28 * 1000, 0);
  AllocWatch watch;
  auto mb = decodePayload<TopologyUpdate>(big.data(), big.size());
  CHECK_FALSE(mb.isOk());
  CHECK(watch.maxSoFar() < 28 * 1000 * 4);
}
