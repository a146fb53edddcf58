// Sample values of every wire message and the helpers the wire tests share (test_wire_*.cpp): byte
// patterns, payload bytes, a round trip through a frame that checks the header and the re-encoding.
#ifndef PCCL_TESTS_WIRE_SAMPLES_HPP_
#define PCCL_TESTS_WIRE_SAMPLES_HPP_

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "wire/bytes.hpp"
#include "wire/data.hpp"
#include "wire/frame.hpp"
#include "wire/messages.hpp"
#include "wire/sync_messages.hpp"
#include "wire_message_list.hpp"

namespace pccl::wire::samples {

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

inline std::vector<uint8_t> payloadPart(const std::vector<uint8_t>& frame) {
  return std::vector<uint8_t>(frame.begin() + static_cast<std::ptrdiff_t>(kHeaderSize), frame.end());
}

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

inline MemberInfo member(uint8_t seed, std::string host, uint16_t port, uint32_t group, uint32_t connections) {
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
inline Hello sample(Tag<Hello>) {
  Hello m;
  m.role = static_cast<uint8_t>(Role::kPeerToPeer);
  m.flags = static_cast<uint8_t>(HelloFlags::kHasSecret);
  m.nonce = pattern<32>(1);
  m.kx = pattern<32>(41);
  return m;
}
inline HelloReply sample(Tag<HelloReply>) {
  HelloReply m;
  m.flags = 1;
  m.nonce = pattern<32>(2);
  m.kx = pattern<32>(42);
  return m;
}
inline AuthProof sample(Tag<AuthProof>) {
  AuthProof m;
  m.mac = pattern<32>(3);
  return m;
}
inline AuthOk sample(Tag<AuthOk>) {
  AuthOk m;
  m.mac = pattern<32>(4);
  return m;
}
inline Error sample(Tag<Error>) {
  Error m;
  m.code = static_cast<uint16_t>(Code::kAuthFailed);
  m.message = "shared secret mismatch \xE2\x9C\x97 (UTF-8 kept)";
  m.message += std::string(1, '\0') + "tail after a NUL";
  return m;
}
inline JoinRequest sample(Tag<JoinRequest>) {
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
  m.region = "eu-west.zone_2";
  m.ring_region = "auto-1";
  m.levels = 2;
  m.inbound = 0;
  return m;
}
inline JoinAccepted sample(Tag<JoinAccepted>) {
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
inline RunResumed sample(Tag<RunResumed>) {
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
inline TopologyUpdate sample(Tag<TopologyUpdate>) {
  TopologyUpdate m;
  m.epoch = 0x0123456789ABCDEFull;
  m.ring.push_back(member(10, "10.0.0.1", 29501, 0, 1));
  m.ring.push_back(member(20, "", 65535, 0xFFFFFFFF, 0));
  m.ring.push_back(member(30, "host-with-a-longer-name.example", 1, 42, 16));
  m.ring.push_back(member(40, std::string(255, 'h'), 443, 3, 4));
  m.ring.push_back(member(50, "::1", 8080, 9, 2));
  m.ring[0].region = "us-east-1";
  m.ring[2].region = "auto-0";
  m.ring[3].region = std::string(kMaxRegion, 'R');
  m.ring[4].region = "a.b_c-D9";
  m.ring[1].inbound = 0;
  m.ring[2].relay = pattern<16>(50);
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
inline QueryStatus sample(Tag<QueryStatus>) {
  QueryStatus m;
  m.request_id = 0xCAFEBABE12345678ull;
  return m;
}
inline MembershipStatus sample(Tag<MembershipStatus>) {
  MembershipStatus m;
  m.request_id = 0xFFFFFFFFFFFFFFFEull;
  m.accepted = 123456;
  m.pending = 0x80000001;
  m.vote_open = 1;
  m.stale = 0xFF;
  return m;
}
inline PeerLeft sample(Tag<PeerLeft>) {
  PeerLeft m;
  m.peer_id = pattern<16>(6);
  m.reason = static_cast<uint8_t>(LeaveReason::kConnectionLost);
  m.detail = "connection reset by peer";
  return m;
}
inline P2PHello sample(Tag<P2PHello>) {
  P2PHello m;
  m.sender_id = pattern<16>(7);
  m.epoch = 0x00000001FFFFFFFFull;
  m.index = 3;
  m.flags = kHelloResumable | kHelloResume;
  m.received = 0x0102030405060708ull;
  m.signature = pattern<64>(44);
  return m;
}
inline P2PAccept sample(Tag<P2PAccept>) {
  P2PAccept m;
  m.flags = kHelloResumable;
  m.received = 0x1112131415161718ull;
  return m;
}

inline OpAnnounce sample(Tag<OpAnnounce>) {
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
inline OpAbort sample(Tag<OpAbort>) {
  OpAbort m;
  m.tag = 43;
  m.seq = 9;
  m.code = static_cast<uint16_t>(Code::kMismatch);
  m.reason = "peers disagree on tag 43: count=1 vs count=2";
  return m;
}
inline OpDone sample(Tag<OpDone>) {
  OpDone m;
  m.tag = 0x0102030405060708ull;
  m.seq = 0x11223344u;
  return m;
}
inline OpFailed sample(Tag<OpFailed>) {
  OpFailed m;
  m.tag = 44;
  m.seq = 3;
  m.code = static_cast<uint16_t>(Code::kTimeout);
  m.ring_broken = 1;
  m.reason = "deadline passed";
  return m;
}
inline OpState sample(Tag<OpState>) {
  OpState m;
  m.epoch = 12;
  m.tag = 45;
  m.seq = 2;
  m.state = static_cast<uint8_t>(OpPhase::kPrepared);
  return m;
}
inline OpQuery sample(Tag<OpQuery>) {
  OpQuery m;
  m.epoch = 12;
  m.tag = 46;
  m.seq = 0xFFFFFFFFu;
  return m;
}
inline OpOutcome sample(Tag<OpOutcome>) {
  OpOutcome m;
  m.epoch = 12;
  m.tag = 47;
  m.seq = 1;
  m.committed = 0;
  m.code = static_cast<uint16_t>(Code::kPeerLost);
  m.reason = "tag 47 (call 1) failed on peer 01020304 before every peer held its result";
  return m;
}

inline SyncAnnounce sample(Tag<SyncAnnounce>) {
  SyncAnnounce m;
  m.epoch = 7;
  m.revision = 12;
  m.strategy = static_cast<uint8_t>(SyncStrategy::kReceiveOnly);
  m.keys.push_back(SyncKey{"model.embed.weight", 10, 1u << 20, pattern<32>(3)});
  m.keys.push_back(SyncKey{"outer.momentum", 11, 5, pattern<32>(4)});
  return m;
}
inline SyncPlan sample(Tag<SyncPlan>) {
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

inline MemberInfo sampleMember(uint8_t seed) {
  MemberInfo mi;
  mi.id = pattern<16>(seed);
  mi.host = "10.0.0." + std::to_string(seed);
  mi.port = static_cast<uint16_t>(4000 + seed);
  mi.group = 2;
  mi.connections = 4;
  mi.host_connections = 1;
  mi.ring_key = pattern<32>(static_cast<uint8_t>(seed + 1));
  mi.region = "region-" + std::to_string(seed);
  mi.inbound = seed % 2;
  return mi;
}
inline RelayHello sample(Tag<RelayHello>) {
  RelayHello m;
  m.sender_id = pattern<16>(71);
  m.epoch = 0x0A0B0C0D0E0F1011ull;
  m.from = pattern<16>(71);
  m.to = pattern<16>(72);
  m.index = 31;
  m.signature = pattern<64>(73);
  return m;
}
inline ProbePlan sample(Tag<ProbePlan>) {
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
  m.target_dials = true;
  return m;
}
inline ProbeReport sample(Tag<ProbeReport>) {
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
inline LinkQuery sample(Tag<LinkQuery>) { return LinkQuery{77, 16384}; }
inline LinkReport sample(Tag<LinkReport>) {
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
         std::is_same_v<M, WithdrawVote> || std::is_same_v<M, Leave> || std::is_same_v<M, RelayReady>;
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
inline void rawStr(std::vector<uint8_t>* v, size_t n, char fill) {
  v->push_back(static_cast<uint8_t>(n));
  v->push_back(static_cast<uint8_t>(n >> 8));
  v->insert(v->end(), n, static_cast<uint8_t>(fill));
}

}  // namespace pccl::wire::samples

#endif  // PCCL_TESTS_WIRE_SAMPLES_HPP_
