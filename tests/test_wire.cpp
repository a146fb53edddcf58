// The wire layer in isolation: byte layouts, round trips of every message, rejection of malformed
// input, table dispatch, and a seeded robustness loop over random and mutated bytes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "wire/bytes.hpp"
#include "wire/dispatch.hpp"
#include "wire/data.hpp"
#include "wire/frame.hpp"
#include "wire/messages.hpp"
#include "wire/sync_messages.hpp"
#include "wire_message_list.hpp"

// The replaced operator new/delete below pair malloc with free; GCC's inliner cannot see that.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// ---- allocation watch --------------------------------------------------------------------------
// The global operator new is replaced so tests can assert that hostile lengths and counts never
// drive a large allocation. Tracking is off unless a test turns it on.
namespace {
std::atomic<bool> g_track_allocs{false};
std::atomic<size_t> g_max_alloc{0};

void noteAlloc(size_t n) {
  if (!g_track_allocs.load(std::memory_order_relaxed)) return;
  size_t cur = g_max_alloc.load(std::memory_order_relaxed);
  while (n > cur && !g_max_alloc.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
}

struct AllocWatch {
  AllocWatch() {
    g_max_alloc.store(0);
    g_track_allocs.store(true);
  }
  ~AllocWatch() { g_track_allocs.store(false); }
  AllocWatch(const AllocWatch&) = delete;
  AllocWatch& operator=(const AllocWatch&) = delete;
  size_t maxSoFar() const { return g_max_alloc.load(); }
};
}  // namespace

void* operator new(std::size_t n) {
  noteAlloc(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  noteAlloc(n);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
// Every replaced new pairs with free (ASan checks that allocation and release functions match).
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace pccl;
using namespace pccl::wire;

namespace {

// ---- helpers ----------------------------------------------------------------------------------

template <size_t N>
std::array<uint8_t, N> pattern(uint8_t seed) {
  std::array<uint8_t, N> a{};
  for (size_t i = 0; i < N; ++i) a[i] = static_cast<uint8_t>(seed + i * 37u);
  return a;
}

template <typename M>
std::vector<uint8_t> payloadOf(const M& m) {
  std::vector<uint8_t> v;
  ByteWriter w(&v);
  m.encode(w);
  return v;
}

std::vector<uint8_t> payloadPart(const std::vector<uint8_t>& frame) {
  return std::vector<uint8_t>(frame.begin() + static_cast<std::ptrdiff_t>(kHeaderSize), frame.end());
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

MemberInfo member(uint8_t seed, std::string host, uint16_t port, uint32_t group, uint32_t connections) {
  MemberInfo m;
  m.id = pattern<16>(seed);
  m.host = std::move(host);
  m.port = port;
  m.group = group;
  m.connections = connections;
  m.ring_key = pattern<32>(static_cast<uint8_t>(seed + 1));
  return m;
}

// Non-trivial sample values, one per message type.
Hello sample(Tag<Hello>) {
  Hello m;
  m.role = static_cast<uint8_t>(Role::kPeerToPeer);
  m.flags = static_cast<uint8_t>(HelloFlags::kHasSecret);
  m.nonce = pattern<32>(1);
  m.kx = pattern<32>(41);
  return m;
}
HelloReply sample(Tag<HelloReply>) {
  HelloReply m;
  m.flags = 1;
  m.nonce = pattern<32>(2);
  m.kx = pattern<32>(42);
  return m;
}
AuthProof sample(Tag<AuthProof>) {
  AuthProof m;
  m.mac = pattern<32>(3);
  return m;
}
AuthOk sample(Tag<AuthOk>) {
  AuthOk m;
  m.mac = pattern<32>(4);
  return m;
}
Error sample(Tag<Error>) {
  Error m;
  m.code = static_cast<uint16_t>(Code::kAuthFailed);
  m.message = "shared secret mismatch \xE2\x9C\x97 (UTF-8 kept)";
  m.message += std::string(1, '\0') + "tail after a NUL";
  return m;
}
JoinRequest sample(Tag<JoinRequest>) {
  JoinRequest m;
  m.p2p_port = 0xBEEF;
  m.advertise_host = "node-17.cluster.example.org";
  m.group = 0xDEADBEEF;
  m.connections = 7;
  m.host_connections = 3;
  m.ring_key = pattern<32>(43);
  m.client_version = "pccl 0.1.0+g1234abc";
  m.resume_flags = JoinRequest::kResuming | JoinRequest::kRingUp;
  m.run_id = pattern<16>(61);
  m.term = 0x1122334455667788ull;
  m.peer_id = pattern<16>(62);
  m.epoch = 41;
  m.ring = {pattern<16>(62), pattern<16>(63), pattern<16>(64)};
  m.resume_sig = pattern<64>(65);
  return m;
}
JoinAccepted sample(Tag<JoinAccepted>) {
  JoinAccepted m;
  m.peer_id = pattern<16>(5);
  m.heartbeat_interval_ms = 250;
  m.peer_timeout_ms = 0xFEDCBA98;
  m.run_id = pattern<16>(6);
  m.term = 9;
  m.epoch = 0xABCDEF;
  m.resumed = 1;
  return m;
}
RunResumed sample(Tag<RunResumed>) {
  RunResumed m;
  m.epoch = 12;
  m.term = 3;
  m.stale = 1;
  m.detail = "peer(s) ab12 of the ring of epoch 12 did not come back";
  return m;
}
template <MsgType T>
Empty<T> sample(Tag<Empty<T>>) {
  return {};
}
TopologyUpdate sample(Tag<TopologyUpdate>) {
  TopologyUpdate m;
  m.epoch = 0x0123456789ABCDEFull;
  m.ring.push_back(member(10, "10.0.0.1", 29501, 0, 1));
  m.ring.push_back(member(20, "", 65535, 0xFFFFFFFF, 0));
  m.ring.push_back(member(30, "host-with-a-longer-name.example", 1, 42, 16));
  m.ring.push_back(member(40, std::string(255, 'h'), 443, 3, 4));
  m.ring.push_back(member(50, "::1", 8080, 9, 2));
  return m;
}
template <MsgType T>
EpochMsg<T> sample(Tag<EpochMsg<T>>) {
  EpochMsg<T> m;
  m.epoch = 0x8000000000000001ull + static_cast<uint64_t>(T);
  return m;
}
template <MsgType T>
EpochFailure<T> sample(Tag<EpochFailure<T>>) {
  EpochFailure<T> m;
  m.epoch = 0x1122334455667788ull + static_cast<uint64_t>(T);
  m.code = static_cast<uint16_t>(Code::kPeerLost);
  m.reason = "peer 0a0b0c0d did not connect within 5000 ms";
  return m;
}
QueryStatus sample(Tag<QueryStatus>) {
  QueryStatus m;
  m.request_id = 0xCAFEBABE12345678ull;
  return m;
}
MembershipStatus sample(Tag<MembershipStatus>) {
  MembershipStatus m;
  m.request_id = 0xFFFFFFFFFFFFFFFEull;
  m.accepted = 123456;
  m.pending = 0x80000001;
  m.vote_open = 1;
  m.stale = 0xFF;
  return m;
}
PeerLeft sample(Tag<PeerLeft>) {
  PeerLeft m;
  m.peer_id = pattern<16>(6);
  m.reason = static_cast<uint8_t>(LeaveReason::kConnectionLost);
  m.detail = "connection reset by peer";
  return m;
}
P2PHello sample(Tag<P2PHello>) {
  P2PHello m;
  m.sender_id = pattern<16>(7);
  m.epoch = 0x00000001FFFFFFFFull;
  m.index = 3;
  m.signature = pattern<64>(44);
  return m;
}

OpAnnounce sample(Tag<OpAnnounce>) {
  OpAnnounce m;
  m.tag = 0xA1A2A3A4A5A6A7A8ull;
  m.seq = 5;
  m.count = 0x0000001234567890ull;
  m.dtype = 10;
  m.op = 1;
  m.quant = 3;
  m.compress = 19;
  m.epoch = 77;
  m.segment_bytes = 1u << 20;
  m.algo = 1;
  m.kind = 3;
  m.root = 0x01020304u;
  return m;
}
OpAbort sample(Tag<OpAbort>) {
  OpAbort m;
  m.tag = 43;
  m.seq = 9;
  m.code = static_cast<uint16_t>(Code::kMismatch);
  m.reason = "peers disagree on tag 43: count=1 vs count=2";
  return m;
}
OpDone sample(Tag<OpDone>) {
  OpDone m;
  m.tag = 0x0102030405060708ull;
  m.seq = 0x11223344u;
  return m;
}
OpFailed sample(Tag<OpFailed>) {
  OpFailed m;
  m.tag = 44;
  m.seq = 3;
  m.code = static_cast<uint16_t>(Code::kTimeout);
  m.ring_broken = 1;
  m.reason = "deadline passed";
  return m;
}
OpState sample(Tag<OpState>) {
  OpState m;
  m.epoch = 12;
  m.tag = 45;
  m.seq = 2;
  m.state = static_cast<uint8_t>(OpPhase::kPrepared);
  return m;
}
OpQuery sample(Tag<OpQuery>) {
  OpQuery m;
  m.epoch = 12;
  m.tag = 46;
  m.seq = 0xFFFFFFFFu;
  return m;
}
OpOutcome sample(Tag<OpOutcome>) {
  OpOutcome m;
  m.epoch = 12;
  m.tag = 47;
  m.seq = 1;
  m.committed = 0;
  m.code = static_cast<uint16_t>(Code::kPeerLost);
  m.reason = "tag 47 (call 1) failed on peer 01020304 before every peer held its result";
  return m;
}

SyncAnnounce sample(Tag<SyncAnnounce>) {
  SyncAnnounce m;
  m.epoch = 7;
  m.revision = 12;
  m.strategy = static_cast<uint8_t>(SyncStrategy::kReceiveOnly);
  m.keys.push_back(SyncKey{"model.embed.weight", 10, 1u << 20, pattern<32>(3)});
  m.keys.push_back(SyncKey{"outer.momentum", 11, 5, pattern<32>(4)});
  return m;
}
SyncPlan sample(Tag<SyncPlan>) {
  SyncPlan m;
  m.sync_id = 3;
  m.revision = 12;
  m.fetches.push_back(SyncFetch{1, pattern<32>(9), {pattern<16>(5), pattern<16>(6)}});
  return m;
}
template <MsgType T>
SyncOutcome<T> sample(Tag<SyncOutcome<T>>) {
  SyncOutcome<T> m;
  m.sync_id = 3;
  m.code = static_cast<uint16_t>(Code::kMismatch);
  m.reason = "digest of key 1 differs after transfer";
  return m;
}

MemberInfo sampleMember(uint8_t seed) {
  MemberInfo mi;
  mi.id = pattern<16>(seed);
  mi.host = "10.0.0." + std::to_string(seed);
  mi.port = static_cast<uint16_t>(4000 + seed);
  mi.group = 2;
  mi.connections = 4;
  mi.host_connections = 1;
  mi.ring_key = pattern<32>(static_cast<uint8_t>(seed + 1));
  return mi;
}
ProbePlan sample(Tag<ProbePlan>) {
  ProbePlan m;
  m.probe_id = 0x0102030405060708ull;
  m.budget_ms = 2000;
  m.max_bytes = 256ull << 20;
  m.has_target = true;
  m.target = sampleMember(3);
  m.target_connections = 4;
  m.has_source = true;
  m.source = sampleMember(4);
  m.source_connections = 2;
  return m;
}
ProbeReport sample(Tag<ProbeReport>) {
  ProbeReport m;
  m.probe_id = 9;
  m.target_id = pattern<16>(3);
  m.rtt_us = 40000;
  m.tx_bytes = 1 << 30;
  m.source_id = pattern<16>(4);
  m.rx_bytes = 1 << 29;
  m.rx_rate = 125000000;
  m.detail = "receiving: nothing received";
  return m;
}
LinkQuery sample(Tag<LinkQuery>) { return LinkQuery{77, 16384}; }
LinkReport sample(Tag<LinkReport>) {
  LinkReport m;
  m.request_id = 77;
  m.epoch = 5;
  m.total = 3;
  m.first = 1;
  m.links.push_back(LinkEntry{pattern<16>(1), pattern<16>(2), 1000000, 250});
  m.links.push_back(LinkEntry{pattern<16>(2), pattern<16>(1), 0, 0});
  return m;
}

template <typename M>
constexpr bool isEmptyMessage() {
  return std::is_same_v<M, Heartbeat> || std::is_same_v<M, VoteUpdate> || std::is_same_v<M, VoteOptimize> ||
         std::is_same_v<M, WithdrawVote> ||
         std::is_same_v<M, Leave> || std::is_same_v<M, P2PAccept>;
}

// Encodes msg as a frame, checks the header, decodes the payload and checks that the decoded
// message re-encodes to the same bytes. Field-by-field checks are left to the caller.
template <typename M>
M roundTrip(const M& msg, uint64_t epoch) {
  INFO("message " << msgTypeName(static_cast<uint16_t>(M::kType)));
  const std::vector<uint8_t> frame = encodeFrame(msg, epoch);
  REQUIRE(frame.size() >= kHeaderSize);
  const std::vector<uint8_t> payload = payloadPart(frame);
  CHECK(payload == payloadOf(msg));

  auto h = decodeHeader(frame.data(), kHeaderSize, kMaxControlPayload);
  INFO(h.status().toString());
  REQUIRE(h.isOk());
  CHECK(h->magic == kMagic);
  CHECK(h->version == kProtocolVersion);
  CHECK(h->type == static_cast<uint16_t>(M::kType));
  CHECK(h->epoch == epoch);
  CHECK(h->length == payload.size());

  auto m = decodePayload<M>(payload.data(), payload.size());
  INFO(m.status().toString());
  REQUIRE(m.isOk());
  CHECK(payloadOf(*m) == payload);
  return std::move(m).value();
}

// Appends a u16-length-prefixed string of `n` bytes without the writer's clamping.
void rawStr(std::vector<uint8_t>* v, size_t n, char fill) {
  v->push_back(static_cast<uint8_t>(n));
  v->push_back(static_cast<uint8_t>(n >> 8));
  v->insert(v->end(), n, static_cast<uint8_t>(fill));
}

}  // namespace

// ---- layouts ----------------------------------------------------------------------------------

TEST_CASE("wire: header byte layout is 20 little-endian bytes starting with PCCL") {
  FrameHeader h;
  h.type = 0x1234;
  h.epoch = 0x0102030405060708ull;
  h.length = 0x0A0B0C0Du;
  const HeaderBytes b = encodeHeader(h);
  const HeaderBytes expected = {'P',  'C',  'C',  'L',  0x0A, 0x00, 0x34, 0x12, 0x08, 0x07,
                                0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x0D, 0x0C, 0x0B, 0x0A};
  CHECK(b == expected);
  CHECK(kHeaderSize == 20);
  CHECK(kProtocolVersion == 10);

  auto d = decodeHeader(b.data(), b.size(), 0xFFFFFFFFu);
  REQUIRE(d.isOk());
  CHECK(d->magic == kMagic);
  CHECK(d->version == 10);
  CHECK(d->type == 0x1234);
  CHECK(d->epoch == 0x0102030405060708ull);
  CHECK(d->length == 0x0A0B0C0Du);
}

TEST_CASE("wire: P2PHello frame byte layout") {
  P2PHello m;
  for (size_t i = 0; i < m.sender_id.size(); ++i) m.sender_id[i] = static_cast<uint8_t>(0x10 + i);
  m.epoch = 0x1122334455667788ull;
  m.index = 0xA1B2C3D4u;
  for (size_t i = 0; i < m.signature.size(); ++i) m.signature[i] = static_cast<uint8_t>(0x80 + i);
  const std::vector<uint8_t> frame = encodeFrame(m, 0x0000000000000105ull);
  std::vector<uint8_t> expected = {
      // header
      'P', 'C', 'C', 'L', 0x0A, 0x00, 0x30, 0x00,              // magic, version 10, type 48
      0x05, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,          // epoch 0x105
      0x5C, 0x00, 0x00, 0x00,                                  // length 92
      // payload: sender_id
      0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F,
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,          // epoch
      0xD4, 0xC3, 0xB2, 0xA1,                                  // index
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
  }
  SECTION("JoinRequest: the resume signature (protocol 10) is on the wire only when resuming") {
    JoinRequest in = sample(Tag<JoinRequest>{});
    const size_t resuming = payloadOf(in).size();
    in.resume_flags = 0;
    const JoinRequest fresh = roundTrip(in, 11);
    CHECK(payloadOf(in).size() + 64 == resuming);
    CHECK(fresh.resume_sig == Signature{});
    // A resuming request cut before its signature is refused.
    JoinRequest cut = sample(Tag<JoinRequest>{});
    std::vector<uint8_t> p = payloadOf(cut);
    p.resize(p.size() - 1);
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
    const JoinRequest out = roundTrip(in, 12);
    CHECK(out.advertise_host == in.advertise_host);
    CHECK(out.client_version == in.client_version);
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
    CHECK(decodeHeader(encodeFrame(P2PAccept{}, 0).data(), kHeaderSize, 0)->type == 49);
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
  ProbePlan half;
  half.max_bytes = 1;
  half.has_source = true;
  half.source = sampleMember(1);
  half.source_connections = 1;
  const ProbePlan h2 = roundTrip(half, 0);
  CHECK_FALSE(h2.has_target);
  CHECK(h2.source == sampleMember(1));
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

TEST_CASE("wire: a TopologyUpdate member count beyond its bytes is rejected without allocating") {
  for (uint32_t claimed : {0xFFFFFFFFu, 0x10000000u, 1000000u, 2u}) {
    std::vector<uint8_t> p;
    ByteWriter w(&p);
    w.u64(1);
    w.u32(claimed);
    // One real, minimal member (64 bytes): room for exactly one.
    w.fixed(pattern<16>(1));
    w.str("");
    w.u16(1);
    w.u32(2);
    w.u32(3);
    w.u32(4);
    w.fixed(pattern<32>(5));
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
  std::vector<uint8_t> p;
  ByteWriter w(&p);
  w.u64(1);
  w.u32(1);
  w.fixed(pattern<16>(1));
  w.str("");
  w.u16(1);
  w.u32(2);
  w.u32(3);
  w.u32(4);
  w.fixed(pattern<32>(5));
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

// ---- robustness -------------------------------------------------------------------------------

namespace {

struct FuzzStats {
  size_t decodes = 0;
  size_t accepted = 0;
  size_t bad_code = 0;          // a failure whose code is not the one the contract names
  size_t empty_message = 0;     // a failure without a message
  size_t not_canonical = 0;     // an accepted payload that does not re-encode to the same bytes
  size_t header_ok = 0;
  size_t dispatched_ok = 0;
};

template <typename M>
void decodeOne(const uint8_t* p, size_t n, FuzzStats& st) {
  ++st.decodes;
  auto m = decodePayload<M>(p, n);
  if (m.isOk()) {
    ++st.accepted;
    const std::vector<uint8_t> again = payloadOf(*m);
    if (again.size() != n || !std::equal(again.begin(), again.end(), p)) ++st.not_canonical;
    return;
  }
  if (m.status().isOk() || m.status().code() != Code::kProtocolError) ++st.bad_code;
  if (m.status().message().empty()) ++st.empty_message;
}

template <typename... Ms>
void decodeAllImpl(std::tuple<Ms...>*, const uint8_t* p, size_t n, FuzzStats& st) {
  (decodeOne<Ms>(p, n, st), ...);
}

void decodeAll(const std::vector<uint8_t>& bytes, FuzzStats& st) {
  decodeAllImpl(static_cast<AllMessages*>(nullptr), bytes.data(), bytes.size(), st);
}

Dispatcher fullDispatcher() {
  Dispatcher d;
  forEachMessage([&](auto tag) {
    using M = typename decltype(tag)::type;
    d.on<M>([](const FrameHeader&, const M&) { return Status::ok(); });
  });
  return d;
}

// Header, then (when the header is good) dispatch of the payload it announces, then every
// decoder on the bytes after the header. Every buffer is exactly sized so ASan sees overreads.
void fuzzFrame(const std::vector<uint8_t>& bytes, const Dispatcher& d, FuzzStats& st) {
  auto h = decodeHeader(bytes.data(), bytes.size(), kMaxControlPayload);
  if (h.isOk()) {
    ++st.header_ok;
  } else {
    const Code c = h.status().code();
    if (c != Code::kProtocolError && c != Code::kVersionMismatch) ++st.bad_code;
    if (h.status().message().empty()) ++st.empty_message;
  }
  if (bytes.size() < kHeaderSize) return;
  const std::vector<uint8_t> payload(bytes.begin() + static_cast<std::ptrdiff_t>(kHeaderSize), bytes.end());
  if (h.isOk() && h->length == payload.size()) {
    Status s = d.dispatch(*h, payload.data(), payload.size());
    if (s.isOk()) {
      ++st.dispatched_ok;
    } else if (s.code() != Code::kProtocolError) {
      ++st.bad_code;
    }
  }
  decodeAll(payload, st);
}

std::vector<std::vector<uint8_t>> validFrames() {
  std::vector<std::vector<uint8_t>> frames;
  forEachMessage([&](auto tag) {
    using M = typename decltype(tag)::type;
    frames.push_back(encodeFrame(sample(tag), static_cast<uint64_t>(M::kType) << 40));
  });
  TopologyUpdate empty_ring;
  empty_ring.epoch = 3;
  frames.push_back(encodeFrame(empty_ring, 3));
  TopologyUpdate one;
  one.epoch = 4;
  one.ring.push_back(member(1, "h", 2, 3, 4));
  frames.push_back(encodeFrame(one, 4));
  return frames;
}

}  // namespace

TEST_CASE("wire: random byte strings never crash any decoder") {
  std::mt19937 rng(0x5EED1234u);
  std::uniform_int_distribution<int> len_dist(0, 200);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  const Dispatcher d = fullDispatcher();
  const HeaderBytes good = encodeHeader(FrameHeader{});
  FuzzStats st;
  size_t biggest = 0;
  {
    AllocWatch watch;
    for (int i = 0; i < 20000; ++i) {
      std::vector<uint8_t> bytes(static_cast<size_t>(len_dist(rng)));
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte_dist(rng));
      // Half the inputs start with a valid magic and version so the later header checks run too.
      if (i % 2 == 1) {
        for (size_t k = 0; k < 6 && k < bytes.size(); ++k) bytes[k] = good[k];
        if (i % 4 == 3 && bytes.size() >= kHeaderSize) {
          const uint32_t len = static_cast<uint32_t>(bytes.size() - kHeaderSize);
          for (size_t k = 0; k < 4; ++k) bytes[16 + k] = static_cast<uint8_t>(len >> (8 * k));
          bytes[6] = static_cast<uint8_t>(byte_dist(rng) % 64);
          bytes[7] = 0;
        }
      }
      fuzzFrame(bytes, d, st);
      decodeAll(bytes, st);  // the whole string as a payload too
    }
    biggest = watch.maxSoFar();
  }
  INFO("decodes " << st.decodes << ", accepted " << st.accepted << ", headers ok " << st.header_ok);
  CHECK(st.decodes > 20000 * 21);
  CHECK(st.bad_code == 0);
  CHECK(st.empty_message == 0);
  CHECK(st.not_canonical == 0);
  CHECK(st.header_ok > 0);
  CHECK(biggest < 64 * 1024);  // hostile lengths and counts never drive a big allocation
}

TEST_CASE("wire: single byte and bit mutations of valid frames never crash any decoder") {
  std::mt19937 rng(0xC0FFEEu);
  const std::vector<std::vector<uint8_t>> frames = validFrames();
  std::uniform_int_distribution<size_t> frame_dist(0, frames.size() - 1);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  std::uniform_int_distribution<int> bit_dist(0, 7);
  const Dispatcher d = fullDispatcher();
  FuzzStats st;
  size_t biggest = 0;
  {
    AllocWatch watch;
    for (int i = 0; i < 20000; ++i) {
      std::vector<uint8_t> bytes = frames[frame_dist(rng)];
      std::uniform_int_distribution<size_t> pos_dist(0, bytes.size() - 1);
      const size_t pos = pos_dist(rng);
      if (i % 2 == 0) {
        bytes[pos] = static_cast<uint8_t>(bytes[pos] ^ (1u << bit_dist(rng)));
      } else {
        bytes[pos] = static_cast<uint8_t>(byte_dist(rng));
      }
      fuzzFrame(bytes, d, st);
    }
    biggest = watch.maxSoFar();
  }
  INFO("decodes " << st.decodes << ", accepted " << st.accepted << ", dispatched " << st.dispatched_ok);
  CHECK(st.decodes >= 20000 * 21);
  CHECK(st.bad_code == 0);
  CHECK(st.empty_message == 0);
  CHECK(st.not_canonical == 0);
  CHECK(st.dispatched_ok > 0);  // mutations inside fixed fields still decode
  CHECK(biggest < 64 * 1024);
}
