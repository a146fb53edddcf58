// Same-host lending (net/lending.hpp): a data channel whose remote proved it can read our memory
// sends where large payloads lie instead of the payloads, and the remote copies them from there.
// Here: the channel pair on its own (both ends willing, one end willing, sealed and in clear), a
// hand-driven remote (a token not at its address, a lent frame without an accepted offer, an
// unreadable address, the record a lender writes), and real peers on loopback whose results are the
// same bits with reads on, off and mixed. What a hostile remote cannot make a channel read:
// test_lending_security.cpp.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "lending_support.hpp"
#include "reduce_reference.hpp"
#include "test_support.hpp"
#include "wire/data.hpp"

using namespace pccl;
using namespace pccl::test;


TEST_CASE("lending: the wire layouts of the offer, the record and the region (protocols 6 and 10), and the flag rules", "[lending][wire]") {
  using namespace pccl::wire;
  LendOffer o;
  o.pid = 0x01020304u;
  o.token_addr = 0x1112131415161718ull;
  for (size_t i = 0; i < o.nonce.size(); ++i) o.nonce[i] = static_cast<uint8_t>(0xA0 + i);
  const auto ob = encodeLendOffer(o);
  const std::vector<uint8_t> want_offer = {0x04, 0x03, 0x02, 0x01, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13,
                                           0x12, 0x11, 0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7,
                                           0xA8, 0xA9, 0xAA, 0xAB, 0xAC, 0xAD, 0xAE, 0xAF};
  CHECK(std::vector<uint8_t>(ob.begin(), ob.end()) == want_offer);
  auto o2 = decodeLendOffer(ob.data(), ob.size());
  REQUIRE(o2.isOk());
  CHECK(o2->pid == o.pid);
  CHECK(o2->token_addr == o.token_addr);
  CHECK(o2->nonce == o.nonce);
  CHECK(decodeLendOffer(ob.data(), ob.size() - 1).status().code() == Code::kProtocolError);

  const auto rb = encodeLendRecord({0x2122232425262728ull, 0x00100000u});
  const std::vector<uint8_t> want_rec = {0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, 0x00, 0x00, 0x10, 0x00};
  CHECK(std::vector<uint8_t>(rb.begin(), rb.end()) == want_rec);
  auto r2 = decodeLendRecord(rb.data(), rb.size());
  REQUIRE(r2.isOk());
  CHECK(r2->addr == 0x2122232425262728ull);
  CHECK(r2->bytes == (1u << 20));
  const auto huge = encodeLendRecord({1, kMaxDataPayload + 1});
  CHECK_THAT(decodeLendRecord(huge.data(), huge.size()).status().message(), Catch::Contains("lend record of"));
  CHECK(decodeLendRecord(rb.data(), rb.size() + 0).isOk());
  CHECK_FALSE(decodeLendRecord(rb.data(), rb.size() - 1).isOk());

  // Protocol 10: a region of the lender's memory for one operation; empty or wrapping ones are refused.
  const auto gb = encodeLendRegion({0x3132333435363738ull, 0x0000000100000002ull});
  const std::vector<uint8_t> want_reg = {0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31,
                                         0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00};
  CHECK(std::vector<uint8_t>(gb.begin(), gb.end()) == want_reg);
  auto g2 = decodeLendRegion(gb.data(), gb.size());
  REQUIRE(g2.isOk());
  CHECK(g2->addr == 0x3132333435363738ull);
  CHECK(g2->bytes == 0x0000000100000002ull);
  for (const LendRegion bad : {LendRegion{4096, 0}, LendRegion{~0ull - 10, 11}}) {
    const auto b = encodeLendRegion(bad);
    CHECK_THAT(decodeLendRegion(b.data(), b.size()).status().message(), Catch::Contains("lend region of"));
  }
  CHECK_FALSE(decodeLendRegion(gb.data(), gb.size() - 1).isOk());
  const LendRegion r{1000, 100};
  CHECK(r.contains(1000, 100));
  CHECK(r.contains(1050, 50));
  CHECK_FALSE(r.contains(1050, 51));
  CHECK_FALSE(r.contains(999, 1));
  CHECK_FALSE(r.contains(1000, ~0ull));
  CHECK_FALSE(LendRegion{}.contains(0, 0));

  // Flags: one lending (or resume, protocol 17) flag at a time; only kDataLent may come with kDataCompressed.
  const auto flagsOk = [](uint32_t flags) {
    const auto head = encodeDataFrameHead(dataHeader(1, 0, flags, 0), 1, 0);
    return decodeDataHeader(head.data() + kHeaderSize, kDataHeaderSize).isOk();
  };
  for (uint32_t f : {kDataLendOffer, kDataLendAccept, kDataLent, kDataLent | kDataCompressed, kDataLendRegion,
                     kDataLendRetire, kDataAck, kDataNextSeq}) {
    INFO("flags " << f);
    CHECK(flagsOk(f));
  }
  for (uint32_t f : {kDataLent | kDataLendAccept, kDataLendOffer | kDataLendAccept, kDataLendOffer | kDataCompressed,
                     kDataLent | kDataControl, kDataLendAccept | kDataRequest, kDataLendRegion | kDataCompressed,
                     kDataLendRetire | kDataLent, kDataAck | kDataNextSeq, kDataAck | kDataCompressed,
                     kDataNextSeq | kDataControl, 1024u, 2048u}) {
    INFO("flags " << f);
    CHECK_FALSE(flagsOk(f));
  }
}

TEST_CASE("lending: a same-host pair lends large payloads both ways, small ones stay inline, sealed and in clear",
          "[lending]") {
  for (const bool sealed : {false, true}) {
    SECTION(sealed ? "sealed" : "in clear") {
      SocketPair sp;
      const net::SessionId session = randomSession();
      auto tx = std::make_shared<net::DataChannel>(net::Link{std::move(sp.a), cryptoFor(sealed, true), session}, kEpoch, "tx");
      auto rx = std::make_shared<net::DataChannel>(net::Link{std::move(sp.b), cryptoFor(sealed, false), session}, kEpoch, "rx");
      tx->enableLending(net::LendRole::kDialer);
      rx->enableLending(net::LendRole::kAcceptor);
      Recorder tx_sink, rx_sink;
      tx->start(&tx_sink);
      rx->start(&rx_sink);
      // Both offer; each accepts the other's after reading its token.
      REQUIRE(runUntil(sp.io, [&] { return tx->lending() && rx->borrowing() && rx->lending() && tx->borrowing(); }));

      const auto big = pattern(3u << 20, 1);
      const auto small = pattern(net::kLendMinBytes - 1, 2);
      bool big_done = false;
      wire::DataHeader h = wire::dataHeader(11, 2, wire::kDataCompressed, 4096);
      tx->send(h, big.data(), static_cast<uint32_t>(big.size()), [&](const Status& s) {
        CHECK(s.isOk());
        big_done = true;
      }, regionOf(big));
      wire::DataHeader h2 = wire::dataHeader(12, 0, 0, 0);
      tx->send(h2, small.data(), static_cast<uint32_t>(small.size()), [](const Status& s) { CHECK(s.isOk()); });
      // And the other way round, on the same connection.
      const auto back = pattern(1u << 20, 3);
      rx->send(wire::dataHeader(13, 0, 0, 0), back.data(), static_cast<uint32_t>(back.size()), [](const Status&) {},
               regionOf(back));
      REQUIRE(runUntil(sp.io, [&] { return rx_sink.got.size() == 2 && big_done && tx_sink.got.size() == 1; }));

      CHECK((rx_sink.got[0].bytes == big));
      CHECK(rx_sink.got[0].lent);
      CHECK(rx_sink.got[0].h.flags == wire::kDataCompressed);  // the sink sees the frame's own flags
      CHECK(rx_sink.got[0].h.op_id == 11);
      CHECK(rx_sink.got[0].h.offset == 4096);
      CHECK((rx_sink.got[1].bytes == small));
      CHECK_FALSE(rx_sink.got[1].lent);
      CHECK((tx_sink.got[0].bytes == back));
      CHECK(tx_sink.got[0].lent);
      CHECK(tx->bytesSent() == big.size() + small.size());
      CHECK(rx->bytesReceived() == big.size() + small.size());
      tx->close(Status::ok());
      rx->close(Status::ok());
    }
  }
}

TEST_CASE("lending: with one end unwilling, every payload goes through the socket", "[lending]") {
  for (const bool sender_willing : {true, false}) {
    SECTION(sender_willing ? "the receiver does not accept" : "the sender does not offer") {
      SocketPair sp;
      auto tx = std::make_shared<net::DataChannel>(net::Link{std::move(sp.a), {}, {}}, kEpoch, "tx");
      auto rx = std::make_shared<net::DataChannel>(net::Link{std::move(sp.b), {}, {}}, kEpoch, "rx");
      (sender_willing ? tx : rx)->enableLending(sender_willing ? net::LendRole::kDialer : net::LendRole::kAcceptor);
      Recorder tx_sink, rx_sink;
      tx->start(&tx_sink);
      rx->start(&rx_sink);
      const auto big = pattern(1u << 20, 5);
      // Two frames with a round trip between them: the first after the offer went out, the second
      // after any accept would have come back.
      tx->send(wire::dataHeader(1, 0, 0, 0), big.data(), static_cast<uint32_t>(big.size()), [](const Status&) {});
      REQUIRE(runUntil(sp.io, [&] { return rx_sink.got.size() == 1; }));
      rx->send(wire::dataHeader(2, 0, 0, 0), big.data(), 100, [](const Status&) {});
      REQUIRE(runUntil(sp.io, [&] { return tx_sink.got.size() == 1; }));
      tx->send(wire::dataHeader(3, 0, 0, 0), big.data(), static_cast<uint32_t>(big.size()), [](const Status&) {});
      REQUIRE(runUntil(sp.io, [&] { return rx_sink.got.size() == 2; }));
      CHECK_FALSE(tx->lending());
      CHECK_FALSE(rx->borrowing());
      for (const auto& g : rx_sink.got) {
        CHECK((g.bytes == big));
        CHECK_FALSE(g.lent);
      }
      tx->close(Status::ok());
      rx->close(Status::ok());
    }
  }
}

TEST_CASE("lending: an offer whose token is not at its address is declined, and a lent frame then closes the connection",
          "[lending]") {
  HandDriven hd;
  auto& rx = hd.ch;
  auto& sink = hd.sink;
  auto& sp = hd.sp;
  net::Tcp::socket& raw = hd.raw;
  (void)readFrame(raw);  // rx's own offer
  // Our token says one thing, the memory at its address another.
  std::array<uint8_t, 16> elsewhere{};
  elsewhere.fill(0x5A);
  wire::LendOffer lie;
  lie.pid = static_cast<uint32_t>(::getpid());
  lie.token_addr = reinterpret_cast<uintptr_t>(elsewhere.data());
  lie.nonce.fill(0xA5);
  writeFrame(raw, wire::kDataLendOffer, wire::encodeLendOffer(lie));
  const auto data = pattern(64 << 10, 9);
  writeFrame(raw, wire::kDataLent, wire::encodeLendRecord({reinterpret_cast<uintptr_t>(data.data()), 64u << 10}));
  REQUIRE(runUntil(sp.io, [&] { return sink.closed; }));
  CHECK_FALSE(rx->borrowing());
  CHECK(sink.why.code() == Code::kProtocolError);
  CHECK_THAT(sink.why.message(), Catch::Contains("without an accepted offer"));
  CHECK(sink.got.empty());
  // Nothing was accepted: the connection ends with no frame after rx's offer.
  std::array<uint8_t, 1> byte{};
  asio::error_code ec;
  CHECK(asio::read(raw, asio::buffer(byte), ec) == 0);
  CHECK(ec == asio::error::eof);
}

TEST_CASE("lending: a lent payload at an address the lender cannot give closes the connection as PeerLost", "[lending]") {
  HandDriven hd;
  auto& rx = hd.ch;
  auto& sink = hd.sink;
  auto& sp = hd.sp;
  net::Tcp::socket& raw = hd.raw;
  (void)readFrame(raw);  // rx's offer (we do not accept it)
  net::LendSlot slot;
  const wire::LendOffer offer = net::makeLendOffer(hd.session, net::LendRole::kAcceptor, &slot);
  writeFrame(raw, wire::kDataLendOffer, wire::encodeLendOffer(offer));
  REQUIRE(runUntil(sp.io, [&] { return rx->borrowing(); }));
  auto accept = readFrame(raw);
  CHECK(accept.first.flags == wire::kDataLendAccept);
  CHECK(accept.second.empty());
  // The first page is never mapped (announced as the operation's region, so that the read is tried).
  writeFrame(raw, wire::kDataLendRegion, wire::encodeLendRegion({16, 64u << 10}), 9, 1);
  writeFrame(raw, wire::kDataLent, wire::encodeLendRecord({16, 64u << 10}), 9, 1);
  REQUIRE(runUntil(sp.io, [&] { return sink.closed; }));
  CHECK(sink.why.code() == Code::kPeerLost);
  CHECK_THAT(sink.why.message(), Catch::Contains("lent bytes"));
  CHECK(sink.got.empty());
}

TEST_CASE("lending: a lent frame names the payload in the lender's memory, and its send completes when written",
          "[lending]") {
  HandDriven hd;
  auto& tx = hd.ch;
  auto& sink = hd.sink;
  auto& sp = hd.sp;
  net::Tcp::socket& raw = hd.raw;
  auto offer = readFrame(raw);
  REQUIRE(offer.first.flags == wire::kDataLendOffer);
  auto o = wire::decodeLendOffer(offer.second.data(), offer.second.size());
  REQUIRE(o.isOk());
  CHECK(net::probeLender(*o, hd.session, net::LendRole::kDialer, nullptr).isOk());
  // The token is bound to the end that made it: read as the acceptor's, it does not match.
  CHECK_FALSE(net::probeLender(*o, hd.session, net::LendRole::kAcceptor, nullptr).isOk());
  writeEmptyFrame(raw, wire::kDataLendAccept);
  REQUIRE(runUntil(sp.io, [&] { return tx->lending(); }));

  const auto big = pattern(256 << 10, 4);
  const auto small = pattern(1000, 6);
  int done = 0;
  wire::DataHeader h5 = wire::dataHeader(5, 1, 0, 0);
  h5.seq = 3;
  tx->send(h5, big.data(), static_cast<uint32_t>(big.size()), [&](const Status& s) {
    CHECK(s.isOk());
    ++done;
  }, regionOf(big));
  tx->send(wire::dataHeader(6, 0, 0, 0), small.data(), static_cast<uint32_t>(small.size()), [&](const Status& s) {
    CHECK(s.isOk());
    ++done;
  });
  REQUIRE(runUntil(sp.io, [&] { return done == 2; }));
  CHECK(tx->bytesSent() == big.size() + small.size());
  // The operation's region first, then the record inside it.
  auto announced = readFrame(raw);
  CHECK(announced.first.flags == wire::kDataLendRegion);
  CHECK(announced.first.op_id == 5);
  CHECK(announced.first.seq == 3);
  auto reg = wire::decodeLendRegion(announced.second.data(), announced.second.size());
  REQUIRE(reg.isOk());
  CHECK(reg->addr == reinterpret_cast<uintptr_t>(big.data()));
  CHECK(reg->bytes == big.size());
  auto lent = readFrame(raw);
  CHECK(lent.first.flags == wire::kDataLent);
  CHECK(lent.first.seq == 3);
  CHECK(lent.first.op_id == 5);
  CHECK(lent.first.phase == 1);
  auto rec = wire::decodeLendRecord(lent.second.data(), lent.second.size());
  REQUIRE(rec.isOk());
  CHECK(rec->addr == reinterpret_cast<uintptr_t>(big.data()));
  CHECK(rec->bytes == big.size());
  std::vector<uint8_t> copy(big.size());
  REQUIRE(net::readLent(o->pid, rec->addr, copy.data(), rec->bytes).isOk());
  CHECK((copy == big));
  auto inline_frame = readFrame(raw);  // below kLendMinBytes: the bytes themselves
  CHECK(inline_frame.first.flags == 0);
  CHECK((inline_frame.second == small));
  // A payload outside any region of its operation is never lent; the operation's end retires its regions.
  bool inline_done = false;
  // (48 KiB: above kLendMinBytes, and small enough for the socket's buffers while nobody reads.)
  const std::vector<uint8_t> outside(big.begin(), big.begin() + (48 << 10));
  tx->send(wire::dataHeader(7, 0, 0, 0), outside.data(), static_cast<uint32_t>(outside.size()), [&](const Status& s) {
    CHECK(s.isOk());
    inline_done = true;
  });
  tx->operationEnded(5, 3);
  tx->operationEnded(5, 3);  // once only
  tx->operationEnded(6, 0);  // announced nothing: nothing to retire
  REQUIRE(runUntil(sp.io, [&] { return inline_done && tx->idle(); }));
  auto not_lent = readFrame(raw);
  CHECK(not_lent.first.flags == 0);
  CHECK((not_lent.second == outside));
  auto retired = readFrame(raw);
  CHECK(retired.first.flags == wire::kDataLendRetire);
  CHECK(retired.first.op_id == 5);
  CHECK(retired.first.seq == 3);
  CHECK(retired.second.empty());
  // A second accept is a protocol error.
  writeEmptyFrame(raw, wire::kDataLendAccept);
  REQUIRE(runUntil(sp.io, [&] { return sink.closed; }));
  CHECK(sink.why.code() == Code::kProtocolError);
  CHECK_THAT(sink.why.message(), Catch::Contains("a lend accept for no offer"));
}

// Issue 32 §1: a member may not make a peer read memory that is not the member's. Each case: what the
namespace {

// `world` peers on loopback with 64 KiB segments (frames large enough to lend); reads[i] is peer i's
// same_host_reads. Runs float32 sum, float64 avg, int32 max and bfloat16 sum (zstd) at a ring size
// and a gather size, each checked against the reference and across peers; returns the result bytes
// of every case (peer 0's) and the same-host read bytes of each peer. Inputs follow ring positions,
// so every run reduces the same inputs in the same order.
struct Outcome {
  std::vector<std::vector<uint8_t>> results;
  std::vector<uint64_t> read_bytes;
};

Outcome runLending(const std::vector<int>& reads, bool encrypt) {
  const size_t world = reads.size();
  std::vector<CommConfig> configs;
  for (int r : reads) {
    CommConfig c = fastCommConfig(0, encrypt ? "lending test secret" : "");
    c.segment_bytes = 64 << 10;
    c.same_host_connections = 1;
    c.same_host_reads = r;
    c.encrypt = encrypt;
    c.gather_bytes = 1 << 20;
    c.op_timeout_ms = 60000;
    configs.push_back(c);
  }
  MasterConfig mc = fastMasterConfig(encrypt ? "lending test secret" : "");
  mc.encrypt = encrypt;
  LocalCluster cluster = startCluster(configs, mc);
  REQUIRE(cluster.peers.size() == world);
  struct Case {
    DataType dtype;
    RedOp op;
    size_t count;
    int compress;
  };
  const std::vector<Case> cases = {{DataType::kFloat32, RedOp::kSum, 300007, 0},
                                   {DataType::kFloat64, RedOp::kAvg, 150001, 0},
                                   {DataType::kInt32, RedOp::kMax, 262144, 0},
                                   {DataType::kBfloat16, RedOp::kSum, 500000, 1},
                                   {DataType::kFloat32, RedOp::kSum, 40000, 0}};  // gathered
  Outcome out;
  out.results.resize(cases.size());
  std::vector<std::vector<std::vector<uint8_t>>> got(cases.size(), std::vector<std::vector<uint8_t>>(world));
  std::vector<std::string> errors(world);
  cluster.onEach([&](size_t rank) {
    // Inputs by ring position, not by join order (which varies): so runs can be compared bit for bit.
    const uint32_t pos = cluster.peers[rank]->topology().group_rank;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      std::vector<uint8_t> in = makeInput(c.dtype, c.op, c.count, pos, i);
      std::vector<uint8_t> res(in.size());
      ReduceOptions o;
      o.tag = i;
      o.compress = c.compress;
      auto r = cluster.peers[rank]->allReduce(in.data(), res.data(), c.count, c.dtype, c.op, o);
      if (!r.isOk()) errors[rank] += r.status().toString() + "; ";
      got[i][rank] = res;
    }
  });
  for (size_t r = 0; r < world; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].empty());
    out.read_bytes.push_back(cluster.peers[r]->stats().same_host_read_bytes);
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO(typeName(c.dtype) << " " << opName(c.op) << " count=" << c.count);
    std::vector<std::vector<uint8_t>> inputs;
    for (size_t r = 0; r < world; ++r) inputs.push_back(makeInput(c.dtype, c.op, c.count, static_cast<uint32_t>(r), i));
    std::string first;
    CHECK(countWrong(c.dtype, c.op, inputs, got[i][0], c.count, &first) == 0);
    for (size_t r = 1; r < world; ++r) CHECK((got[i][r] == got[i][0]));
    out.results[i] = got[i][0];
  }
  return out;
}

}  // namespace

TEST_CASE("lending: peers on one host read each other's payloads, and the results are the socket path's bits",
          "[lending][allreduce]") {
  const Outcome off = runLending({0, 0, 0}, false);
  for (uint64_t b : off.read_bytes) CHECK(b == 0);

  const Outcome on = runLending({1, 1, 1}, false);
  for (uint64_t b : on.read_bytes) CHECK(b > 0);
  CHECK((on.results == off.results));

  // Peer 1 neither offers nor accepts: its two links carry everything on the socket, the third lends.
  const Outcome mixed = runLending({1, 0, 1}, false);
  CHECK(mixed.read_bytes[1] == 0);
  CHECK(mixed.read_bytes[0] + mixed.read_bytes[2] > 0);
  CHECK((mixed.results == off.results));

  const Outcome sealed = runLending({-1, -1, -1}, true);  // the default: on
  for (uint64_t b : sealed.read_bytes) CHECK(b > 0);
  CHECK((sealed.results == off.results));
}

TEST_CASE("lending: same_host_reads and PCCL_SAME_HOST_READS accept 0 and 1 only", "[lending]") {
  CommConfig c = fastCommConfig(1);
  c.same_host_reads = 2;
  auto bad = Communicator::create(c);
  REQUIRE_FALSE(bad.isOk());
  CHECK(bad.status().code() == Code::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("same_host_reads"));
  c.same_host_reads = -1;
  ::setenv("PCCL_SAME_HOST_READS", "yes", 1);
  auto bad_env = Communicator::create(c);
  ::unsetenv("PCCL_SAME_HOST_READS");
  REQUIRE_FALSE(bad_env.isOk());
  CHECK(bad_env.status().code() == Code::kInvalidArgument);
  CHECK_THAT(bad_env.status().message(), Catch::Contains("PCCL_SAME_HOST_READS='yes'"));
}
