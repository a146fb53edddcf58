// The wire layer in isolation: the bounds-checked ByteReader, shortId and codeFromWire, and the table
// dispatcher (decoded handlers, unknown and unregistered types, decode failures, handler status).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "wire/dispatch.hpp"
#include "wire_samples.hpp"

using namespace pccl;
using namespace pccl::wire;
using namespace pccl::wire::samples;

// ---- ByteReader / shortId -----------------------------------------------------------------------

TEST_CASE("wire: ByteReader::count rejects counts the remaining bytes cannot hold") {
  auto withCount = [](uint32_t n, size_t tail) {
    std::vector<uint8_t> v;
    ByteWriter w(&v);
    w.u32(n);
    v.resize(v.size() + tail, 0xAB);
    return v;
  };
  SECTION("item size 3, 10 bytes remaining: at most 3 items") {
    for (uint32_t n = 0; n <= 3; ++n) {
      const auto v = withCount(n, 10);
      ByteReader r(v.data(), v.size());
      uint32_t got = 99;
      REQUIRE(r.count(&got, 3).isOk());
      CHECK(got == n);
      CHECK(r.remaining() == 10);
    }
    for (uint32_t n : {4u, 5u, 1000u, 0xFFFFFFFFu}) {
      const auto v = withCount(n, 10);
      ByteReader r(v.data(), v.size());
      uint32_t got = 0;
      Status s = r.count(&got, 3);
      INFO("count " << n);
      REQUIRE_FALSE(s.isOk());
      CHECK(s.code() == Code::kProtocolError);
      CHECK(contains(s.message(), std::to_string(n)));
    }
  }
  SECTION("item size 1: count equal to remaining is allowed, one more is not") {
    const auto ok = withCount(10, 10);
    ByteReader r1(ok.data(), ok.size());
    uint32_t got = 0;
    CHECK(r1.count(&got, 1).isOk());
    const auto bad = withCount(11, 10);
    ByteReader r2(bad.data(), bad.size());
    CHECK_FALSE(r2.count(&got, 1).isOk());
  }
  SECTION("item size 28, nothing remaining: only zero") {
    const auto zero = withCount(0, 0);
    ByteReader r1(zero.data(), zero.size());
    uint32_t got = 5;
    CHECK(r1.count(&got, 28).isOk());
    CHECK(got == 0);
    const auto one = withCount(1, 27);
    ByteReader r2(one.data(), one.size());
    CHECK_FALSE(r2.count(&got, 28).isOk());
  }
  SECTION("a truncated count fails") {
    const std::vector<uint8_t> v = {1, 0, 0};
    ByteReader r(v.data(), v.size());
    uint32_t got = 0;
    Status s = r.count(&got, 1);
    CHECK_FALSE(s.isOk());
    CHECK(s.code() == Code::kProtocolError);
  }
}

TEST_CASE("wire: ByteReader reads little-endian and never reads past its span") {
  const std::vector<uint8_t> v = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F};
  ByteReader r(v.data(), v.size());
  uint8_t a = 0;
  uint16_t b = 0;
  uint32_t c = 0;
  uint64_t d = 0;
  REQUIRE(r.u8(&a).isOk());
  REQUIRE(r.u16(&b).isOk());
  REQUIRE(r.u32(&c).isOk());
  REQUIRE(r.u64(&d).isOk());
  CHECK(a == 0x01);
  CHECK(b == 0x0302);
  CHECK(c == 0x07060504u);
  CHECK(d == 0x0F0E0D0C0B0A0908ull);
  CHECK(r.remaining() == 0);
  CHECK(r.expectEnd().isOk());
  CHECK_FALSE(r.u8(&a).isOk());
  CHECK(r.u8(&a).code() == Code::kProtocolError);

  ByteReader r2(v.data(), 7);
  CHECK_FALSE(r2.u64(&d).isOk());
  CHECK(r2.remaining() == 7);  // a failed read consumes nothing
  std::array<uint8_t, 8> arr{};
  CHECK_FALSE(r2.fixed(&arr).isOk());
  CHECK_FALSE(r2.expectEnd().isOk());

  ByteReader empty(nullptr, 0);
  CHECK(empty.remaining() == 0);
  CHECK(empty.expectEnd().isOk());
  std::string s;
  CHECK_FALSE(empty.str(&s).isOk());
  CHECK(empty.bytes(nullptr, 0).isOk());
}

TEST_CASE("wire: shortId is the first four bytes as eight lowercase hex digits") {
  Uuid id{};
  id[0] = 0xDE;
  id[1] = 0xAD;
  id[2] = 0xBE;
  id[3] = 0xEF;
  id[4] = 0xFF;
  CHECK(shortId(id) == "deadbeef");
  Uuid z{};
  CHECK(shortId(z) == "00000000");
  Uuid small{};
  small[0] = 0x00;
  small[1] = 0x0A;
  small[2] = 0x01;
  small[3] = 0xF0;
  small[15] = 0x77;
  CHECK(shortId(small) == "000a01f0");
  CHECK(shortId(pattern<16>(7)).size() == 8);
}


TEST_CASE("wire: codeFromWire knows every code up to TopologyChanged (15) and falls back beyond") {
  CHECK(codeFromWire(static_cast<uint16_t>(Code::kMismatch), Code::kPeerLost) == Code::kMismatch);
  CHECK(static_cast<uint16_t>(Code::kTopologyChanged) == 15);
  CHECK(codeFromWire(15, Code::kPeerLost) == Code::kTopologyChanged);
  CHECK(codeFromWire(16, Code::kPeerLost) == Code::kPeerLost);
  CHECK(codeFromWire(0, Code::kTimeout) == Code::kTimeout);
  CHECK(std::string(codeName(Code::kTopologyChanged)) == "TopologyChanged");
}
// ---- dispatcher -------------------------------------------------------------------------------

TEST_CASE("wire: dispatcher calls the registered handler with the decoded message") {
  Dispatcher d;
  int hello_calls = 0;
  int heartbeat_calls = 0;
  P2PHello got;
  uint64_t got_epoch = 0;
  d.on<P2PHello>([&](const FrameHeader& h, const P2PHello& m) {
    ++hello_calls;
    got = m;
    got_epoch = h.epoch;
    return Status::ok();
  });
  d.on<Heartbeat>([&](const FrameHeader&, const Heartbeat&) {
    ++heartbeat_calls;
    return Status::ok();
  });

  const std::vector<uint8_t> frame = encodeFrame(sample(Tag<P2PHello>{}), 777);
  auto h = decodeHeader(frame.data(), frame.size(), kMaxControlPayload);
  REQUIRE(h.isOk());
  Status s = d.dispatch(*h, frame.data() + kHeaderSize, frame.size() - kHeaderSize);
  REQUIRE(s.isOk());
  CHECK(hello_calls == 1);
  CHECK(heartbeat_calls == 0);
  CHECK(got_epoch == 777);
  CHECK(got.sender_id == pattern<16>(7));
  CHECK(got.epoch == 0x00000001FFFFFFFFull);
  CHECK(got.index == 3);

  const std::vector<uint8_t> hb = encodeFrame(Heartbeat{}, 1);
  auto hh = decodeHeader(hb.data(), hb.size(), kMaxControlPayload);
  REQUIRE(hh.isOk());
  CHECK(d.dispatch(*hh, hb.data() + kHeaderSize, 0).isOk());
  CHECK(hello_calls == 1);
  CHECK(heartbeat_calls == 1);
}

TEST_CASE("wire: dispatcher handles every message type") {
  Dispatcher d;
  std::vector<uint16_t> seen;
  forEachMessage([&](auto tag) {
    using M = typename decltype(tag)::type;
    d.on<M>([&seen](const FrameHeader& h, const M& m) {
      CHECK(h.type == static_cast<uint16_t>(M::kType));
      CHECK(payloadOf(m) == payloadOf(sample(Tag<M>{})));
      seen.push_back(h.type);
      return Status::ok();
    });
  });
  forEachMessage([&](auto tag) {
    using M = typename decltype(tag)::type;
    const std::vector<uint8_t> frame = encodeFrame(sample(tag), 5);
    auto h = decodeHeader(frame.data(), frame.size(), kMaxControlPayload);
    REQUIRE(h.isOk());
    const std::vector<uint8_t> payload = payloadPart(frame);
    Status s = d.dispatch(*h, payload.data(), payload.size());
    INFO(msgTypeName(static_cast<uint16_t>(M::kType)) << ": " << s.toString());
    CHECK(s.isOk());
    REQUIRE_FALSE(seen.empty());
    CHECK(seen.back() == static_cast<uint16_t>(M::kType));
  });
  CHECK(seen.size() == std::tuple_size_v<AllMessages>);
}

TEST_CASE("wire: dispatcher rejects unknown and unregistered types, naming them") {
  Dispatcher d;
  int calls = 0;
  d.on<Hello>([&](const FrameHeader&, const Hello&) {
    ++calls;
    return Status::ok();
  });
  const uint8_t dummy[4] = {0, 0, 0, 0};
  for (uint16_t t : {uint16_t{0}, uint16_t{6}, uint16_t{63}, uint16_t{64}, uint16_t{1000}, uint16_t{0xFFFF}}) {
    FrameHeader h;
    h.type = t;
    Status s = d.dispatch(h, dummy, 0);
    INFO("type " << t << ": " << s.toString());
    REQUIRE_FALSE(s.isOk());
    CHECK(s.code() == Code::kProtocolError);
    CHECK(contains(s.message(), std::to_string(t)));
    CHECK(contains(s.message(), "Unknown"));
  }
  // Known but not registered on this dispatcher.
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kHeartbeat);
  Status s = d.dispatch(h, dummy, 0);
  REQUIRE_FALSE(s.isOk());
  CHECK(s.code() == Code::kProtocolError);
  CHECK(contains(s.message(), "18"));
  CHECK(contains(s.message(), "Heartbeat"));

  h.type = static_cast<uint16_t>(MsgType::kP2PHello);
  Status s2 = d.dispatch(h, dummy, sizeof dummy);
  REQUIRE_FALSE(s2.isOk());
  CHECK(s2.code() == Code::kProtocolError);
  CHECK(contains(s2.message(), "48"));
  CHECK(contains(s2.message(), "P2PHello"));
  CHECK(calls == 0);

  Dispatcher none;
  h.type = static_cast<uint16_t>(MsgType::kHello);
  CHECK(none.dispatch(h, dummy, 0).code() == Code::kProtocolError);
}

TEST_CASE("wire: dispatcher does not call the handler when the payload fails to decode") {
  Dispatcher d;
  int calls = 0;
  d.on<P2PHello>([&](const FrameHeader&, const P2PHello&) {
    ++calls;
    return Status::ok();
  });
  d.on<Heartbeat>([&](const FrameHeader&, const Heartbeat&) {
    ++calls;
    return Status::ok();
  });
  const std::vector<uint8_t> payload = payloadOf(sample(Tag<P2PHello>{}));
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kP2PHello);

  Status truncated = d.dispatch(h, payload.data(), payload.size() - 1);
  CHECK_FALSE(truncated.isOk());
  CHECK(truncated.code() == Code::kProtocolError);
  CHECK(contains(truncated.message(), "P2PHello"));

  std::vector<uint8_t> longer = payload;
  longer.push_back(0);
  Status trailing = d.dispatch(h, longer.data(), longer.size());
  CHECK_FALSE(trailing.isOk());
  CHECK(trailing.code() == Code::kProtocolError);

  h.type = static_cast<uint16_t>(MsgType::kHeartbeat);
  Status hb = d.dispatch(h, payload.data(), 1);
  CHECK_FALSE(hb.isOk());
  CHECK(hb.code() == Code::kProtocolError);
  CHECK(calls == 0);
}

TEST_CASE("wire: dispatcher propagates the handler's status") {
  Dispatcher d;
  int calls = 0;
  d.on<Leave>([&](const FrameHeader&, const Leave&) {
    ++calls;
    return Status::timeout("handler gave up after 3 s");
  });
  d.on<QueryStatus>([&](const FrameHeader&, const QueryStatus& q) {
    ++calls;
    return Status::kicked("request " + std::to_string(q.request_id));
  });
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kLeave);
  Status s = d.dispatch(h, nullptr, 0);
  CHECK(s.code() == Code::kTimeout);
  CHECK(s.message() == "handler gave up after 3 s");

  QueryStatus q;
  q.request_id = 31337;
  const std::vector<uint8_t> p = payloadOf(q);
  h.type = static_cast<uint16_t>(MsgType::kQueryStatus);
  Status s2 = d.dispatch(h, p.data(), p.size());
  CHECK(s2.code() == Code::kKicked);
  CHECK(s2.message() == "request 31337");
  CHECK(calls == 2);
}
