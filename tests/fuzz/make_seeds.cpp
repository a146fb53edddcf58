// Writes the seed corpora of the fuzz harnesses (scripts/fuzz.sh runs it before fuzzing):
//   DIR/frames/     one well-formed frame of every message type, and a data frame header
//   DIR/codec/      valid fp16, bf16 and int8 segments of float32 data (fuzz_codec's input layout)
//   DIR/handshake/  a client's Hello + AuthProof (server side) and a server's HelloReply + AuthOk (client side),
//                   open and encrypting (with a valid ephemeral X25519 key)
// Usage: pccl-fuzz-seeds DIR
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "codec/quant.hpp"
#include "net/auth.hpp"
#include "wire/data.hpp"
#include "wire/frame.hpp"
#include "wire_message_list.hpp"

using namespace pccl;

namespace {

bool write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

void append(std::vector<uint8_t>& to, const std::vector<uint8_t>& more) { to.insert(to.end(), more.begin(), more.end()); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  for (const char* sub : {"", "/frames", "/codec", "/handshake"}) mkdir((dir + sub).c_str(), 0755);
  bool ok = true;
  int n = 0;
  wire::forEachMessage([&](auto tag) {
    using M = typename decltype(tag)::type;
    ok = write(dir + "/frames/" + std::to_string(n++), wire::encodeFrame(M{}, 1)) && ok;
  });
  const auto head = wire::encodeDataFrameHead(wire::dataHeader(7, 1, wire::kDataCompressed, 4096), 1, 0);
  ok = write(dir + "/frames/data", std::vector<uint8_t>(head.begin(), head.end())) && ok;
  // A broadcast's data header (protocol 8: the descriptor names the collective and its root).
  wire::DataHeader bcast = wire::dataHeader(7, 2, 0, 4096);
  bcast.desc.kind = static_cast<uint8_t>(wire::Collective::kBroadcast);
  bcast.desc.root = 2;
  bcast.desc.count = 1u << 20;
  const auto bhead = wire::encodeDataFrameHead(bcast, 1, 0);
  ok = write(dir + "/frames/data-broadcast", std::vector<uint8_t>(bhead.begin(), bhead.end())) && ok;

  // Protocol 10: a lend region frame (data header + its 16-byte payload) and a resuming JoinRequest
  // (its signature follows the ring).
  wire::DataHeader region = wire::dataHeader(7, 0, wire::kDataLendRegion, 0);
  region.seq = 3;
  const auto rhead = wire::encodeDataFrameHead(region, 1, wire::kLendRegionSize);
  std::vector<uint8_t> rframe(rhead.begin(), rhead.end());
  const auto rpayload = wire::encodeLendRegion({0x7f0000001000ull, 1u << 20});
  rframe.insert(rframe.end(), rpayload.begin(), rpayload.end());
  ok = write(dir + "/frames/data-lend-region", rframe) && ok;
  // Protocol 17: a resumable connection's acknowledgement (data header + u64), and a resume hello.
  const auto ahead = wire::encodeDataFrameHead(wire::dataHeader(0, 0, wire::kDataAck, 0), 1, wire::kResumeValueSize);
  std::vector<uint8_t> aframe(ahead.begin(), ahead.end());
  for (int i = 0; i < 8; ++i) aframe.push_back(static_cast<uint8_t>(i == 0 ? 64 : 0));
  ok = write(dir + "/frames/data-ack", aframe) && ok;
  wire::P2PHello again;
  again.epoch = 5;
  again.index = 1;
  again.flags = wire::kHelloResumable | wire::kHelloResume;
  again.received = 1234;
  ok = write(dir + "/frames/p2p-resume", wire::encodeFrame(again, 5)) && ok;
  wire::JoinRequest resume;
  resume.connections = 4;
  resume.host_connections = 1;
  resume.resume_flags = wire::JoinRequest::kResuming | wire::JoinRequest::kRingUp;
  resume.term = 2;
  resume.epoch = 5;
  resume.ring.resize(3);
  resume.resume_sig.fill(0x5A);
  ok = write(dir + "/frames/join-resume", wire::encodeFrame(resume, 0)) && ok;
  // Protocol 11: regions, declared in a JoinRequest and effective in a TopologyUpdate's members.
  resume.region = "eu-west";
  resume.ring_region = "eu-west";
  ok = write(dir + "/frames/join-region", wire::encodeFrame(resume, 0)) && ok;
  wire::TopologyUpdate regions;
  regions.epoch = 6;
  for (const char* r : {"eu-west", "auto-0", ""}) {
    wire::MemberInfo m;
    m.host = "10.0.0.1";
    m.port = 29500;
    m.connections = 4;
    m.host_connections = 1;
    m.region = r;
    regions.ring.push_back(m);
  }
  ok = write(dir + "/frames/topology-regions", wire::encodeFrame(regions, 6)) && ok;
  // Protocol 20: members that cannot be dialled (inbound 0), a relayed link, who dials a probe, and a
  // relay's hello; a JoinRequest that declares inbound = 0.
  regions.ring[1].inbound = 0;
  regions.ring[2].inbound = 0;
  regions.ring[1].id[0] = 1;
  regions.ring[2].id[0] = 2;
  regions.ring[1].relay[0] = 3;
  ok = write(dir + "/frames/topology-relayed", wire::encodeFrame(regions, 6)) && ok;
  wire::ProbePlan probe;
  probe.max_bytes = 1 << 20;
  probe.has_target = true;
  probe.target = regions.ring[1];
  probe.target_connections = 2;
  probe.target_dials = true;
  probe.has_source = true;
  probe.source = regions.ring[2];
  probe.source_connections = 2;
  probe.dial_source = true;
  ok = write(dir + "/frames/probe-reversed", wire::encodeFrame(probe, 0)) && ok;
  wire::RelayHello relay;
  relay.sender_id[0] = 1;
  relay.from[0] = 1;
  relay.to[0] = 2;
  relay.epoch = 6;
  relay.index = 3;
  ok = write(dir + "/frames/relay-hello", wire::encodeFrame(relay, 6)) && ok;
  resume.inbound = 0;
  ok = write(dir + "/frames/join-closed", wire::encodeFrame(resume, 0)) && ok;

  std::vector<float> values(300);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 17) * 0.25f - 2.0f;
  for (codec::Quant q : {codec::Quant::kFp16, codec::Quant::kBf16, codec::Quant::kInt8, codec::Quant::kFp4}) {
    // byte 0: quant in bits 0..2, dtype index 2 (float32) in bits 3..4; bytes 1..2: count.
    std::vector<uint8_t> seed = {static_cast<uint8_t>(static_cast<uint8_t>(q) | (2u << 3)),
                                 static_cast<uint8_t>(values.size() & 0xff), static_cast<uint8_t>(values.size() >> 8)};
    std::vector<uint8_t> wire_bytes(codec::wireBytes(q, codec::DType::kFloat32, values.size()));
    codec::encode(q, codec::DType::kFloat32, values.data(), values.size(), wire_bytes.data());
    append(seed, wire_bytes);
    ok = write(dir + "/codec/q" + std::to_string(static_cast<int>(q)), seed) && ok;
  }

  std::vector<uint8_t> server_side = {0};
  wire::Hello hello;
  hello.role = static_cast<uint8_t>(wire::Role::kPeerToPeer);
  append(server_side, wire::encodeFrame(hello, 0));
  append(server_side, wire::encodeFrame(wire::AuthProof{}, 0));
  std::vector<uint8_t> client_side = {1};
  append(client_side, wire::encodeFrame(wire::HelloReply{}, 0));
  append(client_side, wire::encodeFrame(wire::AuthOk{}, 0));
  ok = write(dir + "/handshake/server", server_side) && write(dir + "/handshake/client", client_side) && ok;
  // The same against an encrypting side (byte 0 bit 2), with the remote's flags saying "encrypt, AES" and a
  // valid ephemeral X25519 key, so that the client side gets past the key agreement to the AuthOk.
  std::vector<uint8_t> enc_server = {6};
  hello.flags = 1 | 2 | 4;
  hello.kx = net::EphemeralKx().publicKey();
  append(enc_server, wire::encodeFrame(hello, 0));
  append(enc_server, wire::encodeFrame(wire::AuthProof{}, 0));
  std::vector<uint8_t> enc_client = {7};
  wire::HelloReply reply;
  reply.flags = 1 | 2 | 4;
  reply.kx = net::EphemeralKx().publicKey();
  append(enc_client, wire::encodeFrame(reply, 0));
  append(enc_client, wire::encodeFrame(wire::AuthOk{}, 0));
  ok = write(dir + "/handshake/server-encrypted", enc_server) && write(dir + "/handshake/client-encrypted", enc_client) &&
       ok;
  if (!ok) std::fprintf(stderr, "pccl-fuzz-seeds: cannot write under %s\n", dir.c_str());
  return ok ? 0 : 1;
}
