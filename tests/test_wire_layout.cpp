// The wire layer in isolation, its byte layouts and round trips: the frame header, P2PHello, the ring
// data header, strings and lists, every message type distinct and named, every message round-tripped.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "wire_samples.hpp"

using namespace pccl;
using namespace pccl::wire;
using namespace pccl::wire::samples;

// ---- layouts ----------------------------------------------------------------------------------

TEST_CASE("wire: header byte layout is 20 little-endian bytes starting with PCCL") {
  FrameHeader h;
  h.type = 0x1234;
  h.epoch = 0x0102030405060708ull;
  h.length = 0x0A0B0C0Du;
  const HeaderBytes b = encodeHeader(h);
  const HeaderBytes expected = {'P',  'C',  'C',  'L',  0x14, 0x00, 0x34, 0x12, 0x08, 0x07,
                                0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x0D, 0x0C, 0x0B, 0x0A};
  CHECK(b == expected);
  CHECK(kHeaderSize == 20);
  CHECK(kProtocolVersion == 20);

  auto d = decodeHeader(b.data(), b.size(), 0xFFFFFFFFu);
  REQUIRE(d.isOk());
  CHECK(d->magic == kMagic);
  CHECK(d->version == 20);
  CHECK(d->type == 0x1234);
  CHECK(d->epoch == 0x0102030405060708ull);
  CHECK(d->length == 0x0A0B0C0Du);
}

TEST_CASE("wire: P2PHello frame byte layout") {
  P2PHello m;
  for (size_t i = 0; i < m.sender_id.size(); ++i) m.sender_id[i] = static_cast<uint8_t>(0x10 + i);
  m.epoch = 0x1122334455667788ull;
  m.index = 0xA1B2C3D4u;
  m.flags = kHelloResumable | kHelloResume;
  m.received = 0x0102030405060708ull;
  for (size_t i = 0; i < m.signature.size(); ++i) m.signature[i] = static_cast<uint8_t>(0x80 + i);
  const std::vector<uint8_t> frame = encodeFrame(m, 0x0000000000000105ull);
  std::vector<uint8_t> expected = {
      // header
      'P', 'C', 'C', 'L', 0x14, 0x00, 0x30, 0x00,              // magic, version 20, type 48
      0x05, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,          // epoch 0x105
      0x65, 0x00, 0x00, 0x00,                                  // length 101
      // payload: sender_id
      0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F,
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,          // epoch
      0xD4, 0xC3, 0xB2, 0xA1,                                  // index
      0x03,                                                    // flags: resumable, resume
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,          // received
  };
  for (size_t i = 0; i < 64; ++i) expected.push_back(static_cast<uint8_t>(0x80 + i));  // signature
  REQUIRE(frame.size() == expected.size());
  for (size_t i = 0; i < frame.size(); ++i) {
    INFO("byte " << i);
    CHECK(static_cast<int>(frame[i]) == static_cast<int>(expected[i]));
  }
}

TEST_CASE("wire: ring data header layout (protocol 8): tag, phase, flags, offset, seq, descriptor") {
  DataHeader d = dataHeader(0x0102030405060708ull, 3, kDataCompressed, 0x1112131415161718ull);
  d.seq = 0xA1A2A3A4u;
  d.desc = OpDesc{0x2122232425262728ull, 0x31323334u, 10, 1, 3, 19, 1, 1, 0x41424344u};
  const auto head = encodeDataFrameHead(d, 0x105, 100);
  REQUIRE(head.size() == kHeaderSize + 50);
  const std::vector<uint8_t> expected = {
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // op_id (the tag)
      0x03, 0x00, 0x00, 0x00,                          // phase
      0x01, 0x00, 0x00, 0x00,                          // flags
      0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,  // offset
      0xA4, 0xA3, 0xA2, 0xA1,                          // seq
      0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21,  // count
      0x34, 0x33, 0x32, 0x31,                          // segment_bytes
      10, 1, 3, 19, 1,                                 // dtype, op, quant, compress, algo
      1,                                               // kind (broadcast)
      0x44, 0x43, 0x42, 0x41,                          // root
  };
  CHECK(std::vector<uint8_t>(head.begin() + kHeaderSize, head.end()) == expected);
  auto back = decodeDataHeader(head.data() + kHeaderSize, kDataHeaderSize);
  REQUIRE(back.isOk());
  CHECK(back->seq == d.seq);
  CHECK(back->desc == d.desc);
  CHECK(decodeDataHeader(head.data() + kHeaderSize, kDataHeaderSize - 1).status().code() == Code::kProtocolError);
  std::vector<uint8_t> unknown(head.begin() + kHeaderSize, head.end());
  unknown[45] = 5;  // no such collective
  CHECK_THAT(decodeDataHeader(unknown.data(), unknown.size()).status().message(),
             Catch::Contains("unknown collective 5"));

  RingCtl c;
  c.kind = RingCtl::kAbort;
  c.value = 3;
  c.code = static_cast<uint16_t>(Code::kMismatch);
  c.desc = d.desc;
  c.reason = "peers disagree on tag 1";
  const std::vector<uint8_t> body = encodeRingCtl(c);
  auto ctl = decodeRingCtl(body.data(), body.size());
  REQUIRE(ctl.isOk());
  CHECK(ctl->kind == RingCtl::kAbort);
  CHECK(ctl->value == 3);
  CHECK(ctl->desc == d.desc);
  CHECK(ctl->reason == c.reason);
  for (size_t n = 0; n < body.size(); ++n) CHECK_FALSE(decodeRingCtl(body.data(), n).isOk());
  std::vector<uint8_t> bad = body;
  bad[0] = 9;
  CHECK_THAT(decodeRingCtl(bad.data(), bad.size()).status().message(), Catch::Contains("unknown kind 9"));
}

TEST_CASE("wire: string and list byte layouts") {
  Error e;
  e.code = 0x0102;
  e.message = "hi";
  CHECK(payloadOf(e) == std::vector<uint8_t>{0x02, 0x01, 0x02, 0x00, 'h', 'i'});

  TopologyUpdate t;
  t.epoch = 9;
  t.ring.push_back(member(0, "ab", 0x0304, 0x05060708, 0x090A0B0C));
  std::vector<uint8_t> expected = {9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
  for (uint8_t b : t.ring[0].id) expected.push_back(b);
  t.ring[0].host_connections = 0x0D0E0F10;
  const std::vector<uint8_t> tail = {2,    0,    'a',  'b',  0x04, 0x03, 0x08, 0x07, 0x06,
                                     0x05, 0x0C, 0x0B, 0x0A, 0x09, 0x10, 0x0F, 0x0E, 0x0D};
  expected.insert(expected.end(), tail.begin(), tail.end());
  for (uint8_t b : t.ring[0].ring_key) expected.push_back(b);
  expected.insert(expected.end(), {0, 0});  // region (protocol 11): empty
  expected.push_back(0);                    // levels (protocol 12)
  expected.insert(expected.end(), 8, 0);    // two_level_bytes (protocol 14)
  expected.push_back(1);                    // inbound (protocol 20): can be dialled
  expected.insert(expected.end(), 16, 0);   // relay (protocol 20): none, a direct link
  CHECK(payloadOf(t) == expected);
  t.ring[0].region = "eu";
  t.ring[0].levels = 2;
  t.ring[0].two_level_bytes = 0x0102030405060708ull;
  t.ring[0].inbound = 0;
  t.ring[0].relay = pattern<16>(90);
  expected.resize(expected.size() - 28);
  expected.insert(expected.end(), {2, 0, 'e', 'u', 2, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0});
  for (uint8_t b : t.ring[0].relay) expected.push_back(b);
  CHECK(payloadOf(t) == expected);
}

TEST_CASE("wire: every message type is distinct, named and fits the dispatch table") {
  std::vector<uint16_t> types;
  forEachMessage([&](auto tag) {
    using M = typename decltype(tag)::type;
    const auto t = static_cast<uint16_t>(M::kType);
    INFO("type " << t);
    CHECK(t < kMaxMsgType);
    CHECK(std::string(msgTypeName(t)) != "Unknown");
    types.push_back(t);
  });
  CHECK(types.size() == std::tuple_size_v<AllMessages>);
  std::sort(types.begin(), types.end());
  CHECK(std::adjacent_find(types.begin(), types.end()) == types.end());
  CHECK(std::string(msgTypeName(0)) == "Unknown");
  CHECK(std::string(msgTypeName(63)) == "Unknown");
  CHECK(std::string(msgTypeName(1000)) == "Unknown");
}

// ---- round trips ------------------------------------------------------------------------------

TEST_CASE("wire: round trip of handshake messages") {
  SECTION("Hello") {
    const Hello in = sample(Tag<Hello>{});
    const Hello out = roundTrip(in, 0);
    CHECK(out.role == static_cast<uint8_t>(Role::kPeerToPeer));
    CHECK(out.flags == 1);
    CHECK(out.nonce == pattern<32>(1));
    CHECK(out.kx == pattern<32>(41));
    const std::vector<uint8_t> f = encodeFrame(in, 0);
    REQUIRE(f.size() == kHeaderSize + 66);  // role, flags, nonce, ephemeral key (protocol.md §5.1)
    CHECK(f[kHeaderSize + 34] == pattern<32>(41)[0]);
  }
  SECTION("HelloReply") {
    const HelloReply in = sample(Tag<HelloReply>{});
    const HelloReply out = roundTrip(in, 0xFFFFFFFFFFFFFFFFull);
    CHECK(out.flags == 1);
    CHECK(out.nonce == pattern<32>(2));
    CHECK(out.kx == pattern<32>(42));
    const std::vector<uint8_t> f = encodeFrame(in, 0);
    REQUIRE(f.size() == kHeaderSize + 65);  // flags, nonce, ephemeral key
    CHECK(f[kHeaderSize + 33] == pattern<32>(42)[0]);
  }
  SECTION("AuthProof") {
    const AuthProof out = roundTrip(sample(Tag<AuthProof>{}), 1);
    CHECK(out.mac == pattern<32>(3));
  }
  SECTION("AuthOk") {
    const AuthOk out = roundTrip(sample(Tag<AuthOk>{}), 2);
    CHECK(out.mac == pattern<32>(4));
  }
  SECTION("Error") {
    const Error in = sample(Tag<Error>{});
    const Error out = roundTrip(in, 3);
    CHECK(out.code == static_cast<uint16_t>(Code::kAuthFailed));
    CHECK(out.message == in.message);
    CHECK(out.message.size() > 30);  // embedded NUL and UTF-8 bytes survive
  }
  SECTION("Error with an empty message") {
    Error in;
    in.code = 0xFFFF;
    const Error out = roundTrip(in, 3);
    CHECK(out.code == 0xFFFF);
    CHECK(out.message.empty());
  }
}

TEST_CASE("wire: round trip of control-plane messages") {
  SECTION("JoinRequest") {
    const JoinRequest out = roundTrip(sample(Tag<JoinRequest>{}), 11);
    CHECK(out.p2p_port == 0xBEEF);
    CHECK(out.advertise_host == "node-17.cluster.example.org");
    CHECK(out.group == 0xDEADBEEF);
    CHECK(out.connections == 7);
    CHECK(out.host_connections == 3);
    CHECK(out.ring_key == pattern<32>(43));
    CHECK(out.client_version == "pccl 0.1.0+g1234abc");
    CHECK(out.resuming());
    CHECK(out.resume_flags == (JoinRequest::kResuming | JoinRequest::kRingUp));
    CHECK(out.run_id == pattern<16>(61));
    CHECK(out.term == 0x1122334455667788ull);
    CHECK(out.peer_id == pattern<16>(62));
    CHECK(out.epoch == 41);
    CHECK(out.ring == std::vector<Uuid>{pattern<16>(62), pattern<16>(63), pattern<16>(64)});
    CHECK(out.resume_sig == pattern<64>(65));
    CHECK(out.region == "eu-west.zone_2");
    CHECK(out.ring_region == "auto-1");
    CHECK(out.levels == 2);
    CHECK(out.inbound == 0);
  }
  SECTION("JoinRequest: the regions (protocol 11) as strings, the levels asked for (protocol 12), then inbound "
          "(protocol 20) end it") {
    JoinRequest in = sample(Tag<JoinRequest>{});
    const std::vector<uint8_t> p = payloadOf(in);
    const std::string tail(p.end() - 2 - 14 - 2 - 6 - 1 - 1, p.end());
    CHECK(tail == std::string("\x0e\x00" "eu-west.zone_2" "\x06\x00" "auto-1" "\x02" "\x00", 2 + 14 + 2 + 6 + 1 + 1));
    in.inbound = 1;
    CHECK(payloadOf(in).back() == 1);
    CHECK(roundTrip(in, 11).inbound == 1);
    in.region.clear();
    in.ring_region.clear();
    const JoinRequest out = roundTrip(in, 11);
    CHECK(out.region.empty());
    CHECK(out.ring_region.empty());
    CHECK(payloadOf(in).size() + 14 + 6 == p.size());
  }
  SECTION("JoinRequest: the resume signature (protocol 10) is on the wire only when resuming") {
    JoinRequest in = sample(Tag<JoinRequest>{});
    const size_t resuming = payloadOf(in).size();
    in.resume_flags = 0;
    const JoinRequest fresh = roundTrip(in, 11);
    CHECK(payloadOf(in).size() + 64 == resuming);
    CHECK(fresh.resume_sig == Signature{});
    // A resuming request cut in its signature is refused.
    JoinRequest cut = sample(Tag<JoinRequest>{});
    cut.region.clear();
    cut.ring_region.clear();
    std::vector<uint8_t> p = payloadOf(cut);
    p.resize(p.size() - 1 - 4 - 1);  // the levels, the two empty region strings and the signature's last byte
    const auto cut_result = decodePayload<JoinRequest>(p.data(), p.size());
    CHECK(cut_result.status().code() == Code::kProtocolError);
  }
  SECTION("JoinRequest with unknown resume flags is rejected") {
    JoinRequest in = sample(Tag<JoinRequest>{});
    in.resume_flags = 0x80;
    const std::vector<uint8_t> frame = encodeFrame(in, 0);
    ByteReader r(frame.data() + kHeaderSize, frame.size() - kHeaderSize);
    CHECK(JoinRequest::decode(r).status().code() == Code::kProtocolError);
  }
  SECTION("RunResumed") {
    const RunResumed out = roundTrip(sample(Tag<RunResumed>{}), 14);
    CHECK(out.epoch == 12);
    CHECK(out.term == 3);
    CHECK(out.stale == 1);
    CHECK(out.detail == sample(Tag<RunResumed>{}).detail);
  }
  SECTION("JoinRequest at its string limits") {
    JoinRequest in;
    in.p2p_port = 1;
    in.advertise_host = std::string(255, 'a');
    in.group = 2;
    in.connections = 3;
    in.client_version = std::string(64, 'v');
    in.region = std::string(kMaxRegion, 'r');
    in.ring_region = std::string(kMaxRegion, 'q');
    const JoinRequest out = roundTrip(in, 12);
    CHECK(out.advertise_host == in.advertise_host);
    CHECK(out.client_version == in.client_version);
    CHECK(out.region == in.region);
    CHECK(out.ring_region == in.ring_region);
    CHECK(out.p2p_port == 1);
    CHECK(out.group == 2);
    CHECK(out.connections == 3);
  }
  SECTION("JoinAccepted") {
    const JoinAccepted out = roundTrip(sample(Tag<JoinAccepted>{}), 13);
    CHECK(out.peer_id == pattern<16>(5));
    CHECK(out.heartbeat_interval_ms == 250);
    CHECK(out.peer_timeout_ms == 0xFEDCBA98);
    CHECK(out.run_id == pattern<16>(6));
    CHECK(out.term == 9);
    CHECK(out.epoch == 0xABCDEF);
    CHECK(out.resumed == 1);
  }
  SECTION("empty messages") {
    forEachMessage([](auto tag) {
      using M = typename decltype(tag)::type;
      if constexpr (isEmptyMessage<M>()) {
        const std::vector<uint8_t> frame = encodeFrame(M{}, 0xABCDull);
        CHECK(frame.size() == kHeaderSize);
        FrameHeader h;
        h.type = static_cast<uint16_t>(M::kType);
        h.epoch = 0xABCD;
        h.length = 0;
        const HeaderBytes hb = encodeHeader(h);
        CHECK(std::equal(hb.begin(), hb.end(), frame.begin()));
        (void)roundTrip(M{}, 0xABCDull);
      }
    });
  }
  SECTION("Heartbeat, VoteUpdate, WithdrawVote, Leave, P2PAccept carry their own type") {
    CHECK(decodeHeader(encodeFrame(Heartbeat{}, 0).data(), kHeaderSize, 0)->type == 18);
    CHECK(decodeHeader(encodeFrame(VoteUpdate{}, 0).data(), kHeaderSize, 0)->type == 19);
    CHECK(decodeHeader(encodeFrame(WithdrawVote{}, 0).data(), kHeaderSize, 0)->type == 20);
    CHECK(decodeHeader(encodeFrame(Leave{}, 0).data(), kHeaderSize, 0)->type == 27);
    CHECK(decodeHeader(encodeFrame(P2PAccept{}, 0).data(), kHeaderSize, kMaxControlPayload)->type == 49);
    CHECK(encodeFrame(P2PAccept{}, 0).size() == kHeaderSize + 9);  // flags, received (protocol 17)
  }
  SECTION("P2PReady and TopologyReady") {
    P2PReady a;
    a.epoch = 0xFFFFFFFFFFFFFFFFull;
    CHECK(roundTrip(a, 5).epoch == 0xFFFFFFFFFFFFFFFFull);
    TopologyReady b;
    b.epoch = 0x0102030405060708ull;
    CHECK(roundTrip(b, 6).epoch == 0x0102030405060708ull);
  }
  SECTION("TopologyFailed and P2PFailed") {
    TopologyFailed a;
    a.epoch = 77;
    a.code = static_cast<uint16_t>(Code::kTimeout);
    a.reason = "ring build timed out";
    const TopologyFailed ao = roundTrip(a, 77);
    CHECK(ao.epoch == 77);
    CHECK(ao.code == static_cast<uint16_t>(Code::kTimeout));
    CHECK(ao.reason == "ring build timed out");

    P2PFailed b;
    b.epoch = 0x8000000000000000ull;
    b.code = 0xFFFF;
    b.reason = std::string(4096, 'r');  // the generic string limit, inclusive
    const P2PFailed bo = roundTrip(b, 78);
    CHECK(bo.epoch == 0x8000000000000000ull);
    CHECK(bo.code == 0xFFFF);
    CHECK(bo.reason == b.reason);
  }
  SECTION("QueryStatus") {
    CHECK(roundTrip(sample(Tag<QueryStatus>{}), 14).request_id == 0xCAFEBABE12345678ull);
  }
  SECTION("MembershipStatus") {
    const MembershipStatus out = roundTrip(sample(Tag<MembershipStatus>{}), 15);
    CHECK(out.request_id == 0xFFFFFFFFFFFFFFFEull);
    CHECK(out.accepted == 123456);
    CHECK(out.pending == 0x80000001);
    CHECK(out.vote_open == 1);
    CHECK(out.stale == 0xFF);
  }
  SECTION("PeerLeft") {
    const PeerLeft out = roundTrip(sample(Tag<PeerLeft>{}), 16);
    CHECK(out.peer_id == pattern<16>(6));
    CHECK(out.reason == static_cast<uint8_t>(LeaveReason::kConnectionLost));
    CHECK(out.detail == "connection reset by peer");
  }
}

TEST_CASE("wire: link survey messages round trip and refuse bad values") {
  const ProbePlan plan = roundTrip(sample(Tag<ProbePlan>{}), 0);
  CHECK(plan.probe_id == 0x0102030405060708ull);
  CHECK(plan.budget_ms == 2000);
  CHECK(plan.max_bytes == 256ull << 20);
  CHECK(plan.has_target);
  CHECK(plan.target == sampleMember(3));
  CHECK(plan.target_connections == 4);
  CHECK(plan.has_source);
  CHECK(plan.source == sampleMember(4));
  CHECK(plan.source_connections == 2);
  CHECK(plan.target_dials);
  CHECK_FALSE(plan.dial_source);
  ProbePlan half;
  half.max_bytes = 1;
  half.has_source = true;
  half.source = sampleMember(1);
  half.source_connections = 1;
  half.dial_source = true;
  const ProbePlan h2 = roundTrip(half, 0);
  CHECK_FALSE(h2.has_target);
  CHECK(h2.source == sampleMember(1));
  CHECK(h2.dial_source);
  CHECK(h2.source.inbound == 1);
  const ProbeReport rep = roundTrip(sample(Tag<ProbeReport>{}), 0);
  CHECK(rep.rtt_us == 40000);
  CHECK(rep.rx_rate == 125000000);
  CHECK(rep.detail == "receiving: nothing received");
  const LinkReport lr = roundTrip(sample(Tag<LinkReport>{}), 0);
  REQUIRE(lr.links.size() == 2);
  CHECK(lr.links[0] == (LinkEntry{pattern<16>(1), pattern<16>(2), 1000000, 250}));
  CHECK(roundTrip(sample(Tag<LinkQuery>{}), 0).first == 16384);

  auto decodeBytes = [](auto tag, std::vector<uint8_t> payload) {
    using M = typename decltype(tag)::type;
    return decodePayload<M>(payload.data(), payload.size()).status();
  };
  SECTION("a plan without bytes to send, a bad flag or a connection count out of range") {
    ProbePlan bad = sample(Tag<ProbePlan>{});
    bad.max_bytes = 0;
    CHECK(decodeBytes(Tag<ProbePlan>{}, payloadOf(bad)).code() == Code::kProtocolError);
    std::vector<uint8_t> p = payloadOf(sample(Tag<ProbePlan>{}));
    p[20] = 2;  // has_target
    CHECK(decodeBytes(Tag<ProbePlan>{}, p).code() == Code::kProtocolError);
    bad = sample(Tag<ProbePlan>{});
    bad.target_connections = 0;
    CHECK(decodeBytes(Tag<ProbePlan>{}, payloadOf(bad)).code() == Code::kProtocolError);
    bad.target_connections = 1025;
    CHECK(decodeBytes(Tag<ProbePlan>{}, payloadOf(bad)).code() == Code::kProtocolError);
    // Who dials (protocol 20): the last byte is dial_source, 0 or 1.
    p = payloadOf(sample(Tag<ProbePlan>{}));
    REQUIRE(p.back() == 0);
    p.back() = 2;
    CHECK(decodeBytes(Tag<ProbePlan>{}, p).code() == Code::kProtocolError);
  }
  SECTION("a link page past its total, or a count the bytes cannot hold") {
    LinkReport bad = sample(Tag<LinkReport>{});
    bad.total = 2;  // first 1 + 2 links > 2
    CHECK(decodeBytes(Tag<LinkReport>{}, payloadOf(bad)).code() == Code::kProtocolError);
    std::vector<uint8_t> p = payloadOf(sample(Tag<LinkReport>{}));
    p[24] = 0xFF;  // count
    CHECK(decodeBytes(Tag<LinkReport>{}, p).code() == Code::kProtocolError);
  }
}

TEST_CASE("wire: round trip of TopologyUpdate with 0, 1 and many members") {
  SECTION("no members") {
    TopologyUpdate in;
    in.epoch = 42;
    const TopologyUpdate out = roundTrip(in, 42);
    CHECK(out.epoch == 42);
    CHECK(out.ring.empty());
    CHECK(payloadOf(in).size() == 12);
  }
  SECTION("one member") {
    TopologyUpdate in;
    in.epoch = 0xFFFFFFFFFFFFFFFFull;
    in.ring.push_back(member(99, "192.168.1.100", 29501, 7, 3));
    const TopologyUpdate out = roundTrip(in, 1);
    CHECK(out.epoch == 0xFFFFFFFFFFFFFFFFull);
    REQUIRE(out.ring.size() == 1);
    CHECK(out.ring[0].id == pattern<16>(99));
    CHECK(out.ring[0].host == "192.168.1.100");
    CHECK(out.ring[0].port == 29501);
    CHECK(out.ring[0].group == 7);
    CHECK(out.ring[0].connections == 3);
  }
  SECTION("many members") {
    TopologyUpdate in;
    in.epoch = 0x0102030405060708ull;
    for (uint32_t i = 0; i < 300; ++i) {
      std::string host = i % 7 == 0 ? std::string() : "peer-" + std::to_string(i) + std::string(i % 200, 'x');
      if (i == 150) host = std::string(255, 'z');
      in.ring.push_back(member(static_cast<uint8_t>(i), host, static_cast<uint16_t>(1000 + i * 211),
                               i * 0x01010101u, i % 9));
      in.ring.back().region = i % 5 == 0 ? std::string() : "r" + std::to_string(i % 17) + std::string(i % 60, '.');
      in.ring.back().levels = static_cast<uint8_t>(i % 3);
      in.ring.back().inbound = static_cast<uint8_t>(i % 2);
    }
    const TopologyUpdate out = roundTrip(in, 3);
    CHECK(out.epoch == in.epoch);
    REQUIRE(out.ring.size() == in.ring.size());
    for (size_t i = 0; i < in.ring.size(); ++i) {
      INFO("member " << i);
      CHECK(out.ring[i].id == in.ring[i].id);
      CHECK(out.ring[i].host == in.ring[i].host);
      CHECK(out.ring[i].port == in.ring[i].port);
      CHECK(out.ring[i].group == in.ring[i].group);
      CHECK(out.ring[i].connections == in.ring[i].connections);
      CHECK(out.ring[i].region == in.ring[i].region);
      CHECK(out.ring[i].levels == in.ring[i].levels);
      CHECK(out.ring[i].inbound == in.ring[i].inbound);
      CHECK(out.ring[i] == in.ring[i]);
    }
  }
  SECTION("the five-member sample") {
    const TopologyUpdate in = sample(Tag<TopologyUpdate>{});
    const TopologyUpdate out = roundTrip(in, 9);
    CHECK(out.epoch == 0x0123456789ABCDEFull);
    CHECK(out.ring == in.ring);
  }
}

TEST_CASE("wire: round trip of P2PHello") {
  const P2PHello out = roundTrip(sample(Tag<P2PHello>{}), 0x00000001FFFFFFFFull);
  CHECK(out.sender_id == pattern<16>(7));
  CHECK(out.epoch == 0x00000001FFFFFFFFull);
  CHECK(out.index == 3);
  CHECK(out.signature == pattern<64>(44));
}

TEST_CASE("wire: every sample round-trips through the generic path") {
  forEachMessage([](auto tag) {
    using M = typename decltype(tag)::type;
    (void)roundTrip(sample(tag), static_cast<uint64_t>(M::kType) * 0x0101010101010101ull);
  });
}
