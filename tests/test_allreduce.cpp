// The ring all-reduce between real peers on loopback (each peer's own io thread and TCP connections):
// correctness against a float64 / modular reference for every dtype, op, world size and count, byte
// identity across peers, concurrency, agreement checks and argument errors. Segments are tiny
// (256 bytes) so that every operation is cut into many segments striped over both connections.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>

#include "reduce_reference.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

struct Case {
  DataType dtype;
  RedOp op;
  size_t count;
  bool in_place;
};

std::string describe(const Case& c) {
  return std::string(typeName(c.dtype)) + " " + opName(c.op) + " count=" + std::to_string(c.count) +
         (c.in_place ? " in-place" : " out-of-place");
}

// Every peer runs every case in order (tag = case index); each result is checked against the
// reference, and all peers' bytes are compared. The bytes sent show the algorithm taken.
void runSweep(size_t world, const std::vector<size_t>& counts, Path path) {
  INFO(pathName(path));
  LocalCluster cluster = startCluster(world, onPath(smallSegments(), path));
  REQUIRE(cluster.peers.size() == world);
  std::vector<Case> cases;
  size_t k = 0;
  for (size_t count : counts) {
    ++k;  // so that a (dtype, op) pair meets both placements across the counts under a sanitizer
    for (DataType t : kAllTypes) {
      for (RedOp op : kAllOps) {
        for (bool in_place : sweepPlacements(k++)) cases.push_back(Case{t, op, count, in_place});
      }
    }
  }
  std::vector<std::vector<std::vector<uint8_t>>> results(cases.size(), std::vector<std::vector<uint8_t>>(world));
  std::vector<std::vector<std::string>> errors(world);
  cluster.onEach([&](size_t rank) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      std::vector<uint8_t> in = makeInput(c.dtype, c.op, c.count, static_cast<uint32_t>(rank), i);
      std::vector<uint8_t> out(in.size(), 0xEE);
      ReduceOptions o;
      o.tag = i;
      Result<ReduceInfo> r = c.in_place
                                 ? cluster.peers[rank]->allReduce(in.data(), in.data(), c.count, c.dtype, c.op, o)
                                 : cluster.peers[rank]->allReduce(in.data(), out.data(), c.count, c.dtype, c.op, o);
      if (!r.isOk()) {
        errors[rank].push_back(describe(c) + ": " + r.status().toString());
        continue;
      }
      if (r->world_size != world) errors[rank].push_back(describe(c) + ": wrong world size");
      // Gather: every input to every peer. Ring: 2(N-1)/N of it, but integer avg's wider partial sums.
      const uint64_t gathered = (world - 1) * c.count * sizeOf(c.dtype);
      const bool floating = c.dtype == DataType::kFloat16 || c.dtype == DataType::kBfloat16 ||
                            c.dtype == DataType::kFloat32 || c.dtype == DataType::kFloat64;
      const bool ring_sends_less = world > 2 && c.count > 1000 && (floating || c.op != RedOp::kAvg);
      if (world > 1 && (path == Path::kGather ? r->tx_bytes != gathered : ring_sends_less && r->tx_bytes >= gathered)) {
        errors[rank].push_back(describe(c) + ": sent " + std::to_string(r->tx_bytes) + " bytes on the " +
                               pathName(path) + " path");
      }
      results[i][rank] = c.in_place ? in : out;
    }
  });
  for (size_t rank = 0; rank < world; ++rank) {
    INFO("rank " << rank);
    CHECK(errors[rank].empty());
    for (const auto& e : errors[rank]) WARN(e);
  }
  size_t checked = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO(describe(c) << " world=" << world);
    std::vector<std::vector<uint8_t>> inputs;
    for (size_t r = 0; r < world; ++r) inputs.push_back(makeInput(c.dtype, c.op, c.count, static_cast<uint32_t>(r), i));
    std::string first;
    REQUIRE(results[i][0].size() == c.count * sizeOf(c.dtype));
    CHECK(countWrong(c.dtype, c.op, inputs, results[i][0], c.count, &first) == 0);
    if (!first.empty()) WARN(first);
    for (size_t r = 1; r < world; ++r) CHECK(results[i][r] == results[i][0]);  // bit-identical everywhere
    ++checked;
  }
  CHECK(checked == cases.size());
}

constexpr DataType kIntegerTypes[] = {DataType::kInt8,  DataType::kUint8,  DataType::kInt16, DataType::kUint16,
                                      DataType::kInt32, DataType::kUint32, DataType::kInt64, DataType::kUint64};

// Every integer dtype's avg over `world` peers with inputs at the edges, in and out of place, with and
// without zstd: exact (the sum over all peers divided once, toward zero) and bit-identical everywhere.
void runIntegerAvgEdges(size_t world, Path path) {
  INFO(pathName(path));
  LocalCluster cluster = startCluster(world, onPath(smallSegments(), path));
  REQUIRE(cluster.peers.size() == world);
  struct Run {
    DataType dtype;
    bool in_place;
    int compress;
  };
  std::vector<Run> runs;
  for (DataType t : kIntegerTypes) {
    for (bool in_place : {false, true}) {
      for (int compress : {0, 1}) runs.push_back(Run{t, in_place, compress});
    }
  }
  constexpr size_t kCount = 1003;
  std::vector<std::vector<std::vector<uint8_t>>> results(runs.size(), std::vector<std::vector<uint8_t>>(world));
  std::vector<std::vector<std::string>> errors(world);
  cluster.onEach([&](size_t rank) {
    for (size_t i = 0; i < runs.size(); ++i) {
      std::vector<uint8_t> in = integerEdgeInput(runs[i].dtype, static_cast<uint32_t>(rank), kCount);
      std::vector<uint8_t> out(in.size(), 0xEE);
      ReduceOptions o;
      o.tag = i;
      o.compress = runs[i].compress;
      uint8_t* dst = runs[i].in_place ? in.data() : out.data();
      auto r = cluster.peers[rank]->allReduce(in.data(), dst, kCount, runs[i].dtype, RedOp::kAvg, o);
      if (!r.isOk()) errors[rank].push_back(std::string(typeName(runs[i].dtype)) + ": " + r.status().toString());
      results[i][rank] = runs[i].in_place ? in : out;
    }
  });
  for (size_t rank = 0; rank < world; ++rank) {
    CHECK(errors[rank].empty());
    for (const auto& e : errors[rank]) WARN(e);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO(typeName(runs[i].dtype) << " avg over " << world << " peers" << (runs[i].in_place ? " in place" : "")
                                 << " compress=" << runs[i].compress);
    std::vector<std::vector<uint8_t>> inputs;
    for (size_t r = 0; r < world; ++r) inputs.push_back(integerEdgeInput(runs[i].dtype, static_cast<uint32_t>(r), kCount));
    std::string first;
    CHECK(countWrong(runs[i].dtype, RedOp::kAvg, inputs, results[i][0], kCount, &first) == 0);
    if (!first.empty()) WARN(first);
    for (size_t r = 1; r < world; ++r) CHECK(results[i][r] == results[i][0]);
  }
}

}  // namespace

TEST_CASE("allreduce: integer avg is exact at the edges of every integer dtype, 2 peers, ring and gather", "[allreduce]") {
  for (Path p : {Path::kRing, Path::kGather}) runIntegerAvgEdges(2, p);
}
TEST_CASE("allreduce: integer avg is exact at the edges of every integer dtype, 3 peers, ring and gather", "[allreduce]") {
  for (Path p : {Path::kRing, Path::kGather}) runIntegerAvgEdges(3, p);
}
TEST_CASE("allreduce: integer avg is exact at the edges of every integer dtype, 7 peers, ring and gather", "[allreduce]") {
  for (Path p : {Path::kRing, Path::kGather}) runIntegerAvgEdges(7, p);
}

TEST_CASE("allreduce: 1 peer, every dtype and op, counts 0/1/odd/large, ring and gather", "[allreduce][sweep]") {
  for (Path p : {Path::kRing, Path::kGather}) runSweep(1, {0, 1, 1001, kSweepLargeCount}, p);
}
TEST_CASE("allreduce: 2 peers, every dtype and op, counts 0/1/odd/large, ring and gather", "[allreduce][sweep]") {
  for (Path p : {Path::kRing, Path::kGather}) runSweep(2, {0, 1, 1001, kSweepLargeCount}, p);
}
TEST_CASE("allreduce: 3 peers, every dtype and op, counts 0/1/odd/large, ring and gather", "[allreduce][sweep]") {
  for (Path p : {Path::kRing, Path::kGather}) runSweep(3, {0, 1, 1001, kSweepLargeCount}, p);
}
TEST_CASE("allreduce: 4 peers, every dtype and op, counts 0/1/odd/large, ring and gather", "[allreduce][sweep]") {
  for (Path p : {Path::kRing, Path::kGather}) runSweep(4, {0, 1, 1001, kSweepLargeCount}, p);
}
TEST_CASE("allreduce: 7 peers, every dtype and op, counts 0/1/odd/large, ring and gather", "[allreduce][sweep]") {
  for (Path p : {Path::kRing, Path::kGather}) runSweep(7, {0, 1, 3, 1001, kSweepLargeCount}, p);
}

TEST_CASE("allreduce: 16 concurrent operations of mixed sizes and dtypes, started in different orders", "[allreduce]") {
  constexpr size_t kWorld = 4, kOps = 16;
  LocalCluster cluster = startCluster(kWorld, smallSegments());
  REQUIRE(cluster.peers.size() == kWorld);
  std::vector<Case> cases;
  for (size_t i = 0; i < kOps; ++i) {
    cases.push_back(Case{kAllTypes[(i * 5) % 12], kAllOps[i % 5], (i * 7919) % 30000 + (i % 3), i % 2 == 0});
  }
  std::vector<std::vector<std::vector<uint8_t>>> results(kOps, std::vector<std::vector<uint8_t>>(kWorld));
  std::atomic<int> failures{0};
  cluster.onEach([&](size_t rank) {
    std::vector<size_t> order(kOps);
    for (size_t i = 0; i < kOps; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(rank) + 1));
    std::vector<std::vector<uint8_t>> in(kOps), out(kOps);
    std::vector<ReduceHandle> handles(kOps);
    for (size_t i : order) {
      const Case& c = cases[i];
      in[i] = makeInput(c.dtype, c.op, c.count, static_cast<uint32_t>(rank), 100 + i);
      out[i].assign(in[i].size(), 0);
      ReduceOptions o;
      o.tag = 1000 + i;
      auto h = cluster.peers[rank]->allReduceAsync(in[i].data(), c.in_place ? in[i].data() : out[i].data(), c.count,
                                                   c.dtype, c.op, o);
      if (!h.isOk()) {
        ++failures;
        continue;
      }
      handles[i] = *h;
    }
    for (size_t i : order) {
      if (!handles[i].valid() || !handles[i].wait().isOk()) {
        ++failures;
        continue;
      }
      results[i][rank] = cases[i].in_place ? in[i] : out[i];
    }
  });
  REQUIRE(failures == 0);
  for (size_t i = 0; i < kOps; ++i) {
    const Case& c = cases[i];
    INFO(describe(c));
    std::vector<std::vector<uint8_t>> inputs;
    for (size_t r = 0; r < kWorld; ++r) {
      inputs.push_back(makeInput(c.dtype, c.op, c.count, static_cast<uint32_t>(r), 100 + i));
    }
    CHECK(countWrong(c.dtype, c.op, inputs, results[i][0], c.count, nullptr) == 0);
    for (size_t r = 1; r < kWorld; ++r) CHECK(results[i][r] == results[i][0]);
  }
}

TEST_CASE("allreduce: peers that disagree all get Mismatch saying what differs, and the ring still works",
          "[allreduce]") {
  const Path path = GENERATE(Path::kRing, Path::kGather);
  INFO(pathName(path));
  LocalCluster cluster = startCluster(3, onPath(smallSegments(), path));
  REQUIRE(cluster.peers.size() == 3);
  struct Variant {
    const char* name;
    size_t count;
    DataType dtype;
    RedOp op;
    const char* says;
  };
  const Variant variants[] = {{"count", 101, DataType::kFloat32, RedOp::kSum, "count=101"},
                              {"dtype", 100, DataType::kInt32, RedOp::kSum, "dtype=int32"},
                              {"op", 100, DataType::kFloat32, RedOp::kMax, "op=max"}};
  uint64_t tag = 1;
  for (const Variant& v : variants) {
    SECTION(std::string("peer 2 differs in ") + v.name) {
      std::vector<Status> st(3);
      std::vector<float> buf(200, 1.0f);
      std::vector<std::vector<float>> bufs(3, buf);
      cluster.onEach([&](size_t rank) {
        ReduceOptions o;
        o.tag = tag;
        const bool odd = rank == 2;
        st[rank] = cluster.peers[rank]->allReduce(bufs[rank].data(), bufs[rank].data(), odd ? v.count : 100,
                                                  odd ? v.dtype : DataType::kFloat32, odd ? v.op : RedOp::kSum, o)
                       .status();
      });
      for (size_t r = 0; r < 3; ++r) {
        INFO("rank " << r << ": " << st[r].toString());
        CHECK(st[r].code() == Code::kMismatch);
        CHECK(st[r].message().find(v.says) != std::string::npos);
        CHECK(bufs[r] == buf);  // untouched
      }
      // Nothing is left behind: the same tag works at once.
      cluster.onEach([&](size_t rank) {
        ReduceOptions o;
        o.tag = tag;
        st[rank] = cluster.peers[rank]->allReduce(bufs[rank].data(), bufs[rank].data(), 100, DataType::kFloat32,
                                                  RedOp::kSum, o)
                       .status();
      });
      for (size_t r = 0; r < 3; ++r) {
        CHECK(st[r].isOk());
        CHECK(bufs[r][0] == 3.0f);
        CHECK(bufs[r][150] == 1.0f);
      }
    }
  }
}

TEST_CASE("allreduce: peers with different gather limits get Mismatch naming the algorithm, and larger calls agree",
          "[allreduce]") {
  CommConfig gathers = smallSegments();
  CommConfig never = onPath(smallSegments(), Path::kRing);
  gathers.segment_bytes = never.segment_bytes = 1 << 20;
  LocalCluster cluster = startCluster({gathers, gathers, never});
  REQUIRE(cluster.peers.size() == 3);
  // 100 floats: peers 0 and 1 gather, peer 2 runs the ring. Nothing of either is combined.
  std::vector<Status> st(3);
  std::vector<std::vector<float>> small(3, std::vector<float>(100, 1.0f));
  cluster.onEach([&](size_t rank) {
    st[rank] = cluster.peers[rank]->allReduce(small[rank].data(), small[rank].data(), 100, DataType::kFloat32,
                                              RedOp::kSum).status();
  });
  for (size_t r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << st[r].toString());
    CHECK(st[r].code() == Code::kMismatch);
    CHECK(st[r].message().find("algo=ring") != std::string::npos);
    CHECK(st[r].message().find("algo=gather") != std::string::npos);
    CHECK(small[r] == std::vector<float>(100, 1.0f));
  }
  // 2 x 4 MiB is past every gather limit: all run the ring and succeed.
  const size_t big = 1 << 20;
  std::vector<std::vector<float>> large(3, std::vector<float>(big, 1.0f));
  cluster.onEach([&](size_t rank) {
    st[rank] = cluster.peers[rank]->allReduce(large[rank].data(), large[rank].data(), big, DataType::kFloat32,
                                              RedOp::kSum).status();
  });
  for (size_t r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << st[r].toString());
    CHECK(st[r].isOk());
    CHECK(large[r][big - 1] == 3.0f);
  }
}

TEST_CASE("allreduce: reusing a tag still in flight is InvalidUsage and does not disturb the first", "[allreduce]") {
  LocalCluster cluster = startCluster(2, smallSegments());
  REQUIRE(cluster.peers.size() == 2);
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f), other(1000, 5.0f);
  ReduceOptions o;
  o.tag = 7;
  auto first = cluster.peers[0]->allReduceAsync(a.data(), a.data(), a.size(), DataType::kFloat32, RedOp::kSum, o);
  REQUIRE(first.isOk());
  auto again = cluster.peers[0]->allReduceAsync(other.data(), other.data(), other.size(), DataType::kFloat32,
                                                RedOp::kSum, o);
  REQUIRE_FALSE(again.isOk());
  CHECK(again.status().code() == Code::kInvalidUsage);
  CHECK(again.status().message().find("tag 7") != std::string::npos);
  CHECK(cluster.peers[0]->lastError().find("tag 7") != std::string::npos);
  CHECK_FALSE(first->test());  // still waiting for peer 1
  // updateTopology is refused while the operation is in flight.
  CHECK(cluster.peers[0]->updateTopology().code() == Code::kInvalidUsage);
  auto second = cluster.peers[1]->allReduce(b.data(), b.data(), b.size(), DataType::kFloat32, RedOp::kSum, o);
  REQUIRE(second.isOk());
  auto r = first->wait();
  REQUIRE(r.isOk());
  CHECK(r->world_size == 2);
  CHECK(r->tx_bytes > 0);
  CHECK(r->rx_bytes > 0);
  CHECK(a == std::vector<float>(1000, 3.0f));
  CHECK(b == a);
  CHECK(other == std::vector<float>(1000, 5.0f));
}

TEST_CASE("allreduce: an operation nobody else joins ends with Timeout at its deadline, input intact", "[allreduce]") {
  CommConfig cfg = smallSegments();
  cfg.op_timeout_ms = 500;
  LocalCluster cluster = startCluster(2, cfg);
  REQUIRE(cluster.peers.size() == 2);
  std::vector<float> a(100, 1.0f);
  auto t0 = std::chrono::steady_clock::now();
  auto r = cluster.peers[0]->allReduce(a.data(), a.data(), a.size(), DataType::kFloat32, RedOp::kSum);
  const double took = secondsSince(t0);
  REQUIRE_FALSE(r.isOk());
  CHECK(r.status().code() == Code::kTimeout);
  CHECK(took >= 0.45);
  CHECK(took < 3.0);
  CHECK(a == std::vector<float>(100, 1.0f));
  // Both peers can still reduce together afterwards.
  std::vector<Status> st(2);
  std::vector<std::vector<float>> bufs(2, std::vector<float>(100, 2.0f));
  cluster.onEach([&](size_t rank) {
    ReduceOptions o;
    o.tag = 1;
    st[rank] = cluster.peers[rank]->allReduce(bufs[rank].data(), bufs[rank].data(), 100, DataType::kFloat32,
                                              RedOp::kSum, o).status();
  });
  CHECK(st[0].isOk());
  CHECK(st[1].isOk());
  CHECK(bufs[0][99] == 4.0f);
}

TEST_CASE("allreduce: bad arguments and unavailable options are refused before anything is sent", "[allreduce]") {
  LocalCluster cluster = startCluster(1, smallSegments());
  REQUIRE(cluster.peers.size() == 1);
  Communicator& c = *cluster.peers[0];
  std::vector<float> buf(64, 1.0f);
  CHECK(c.allReduce(nullptr, buf.data(), 4, DataType::kFloat32, RedOp::kSum).status().code() ==
        Code::kInvalidArgument);
  CHECK(c.allReduce(buf.data(), buf.data() + 1, 8, DataType::kFloat32, RedOp::kSum).status().code() ==
        Code::kInvalidArgument);  // partial overlap
  CHECK(c.allReduce(buf.data(), buf.data(), 4, static_cast<DataType>(40), RedOp::kSum).status().code() ==
        Code::kInvalidArgument);
  CHECK(c.allReduce(buf.data(), buf.data(), 4, DataType::kFloat32, static_cast<RedOp>(9)).status().code() ==
        Code::kInvalidArgument);
  ReduceOptions q;
  q.quant = Quant::kInt8;
  CHECK(c.allReduce(buf.data(), buf.data(), 4, DataType::kInt32, RedOp::kSum, q).status().code() ==
        Code::kInvalidArgument);  // integers are never quantized
  CHECK(c.allReduce(buf.data(), buf.data(), 4, DataType::kFloat32, RedOp::kProd, q).status().code() ==
        Code::kInvalidArgument);
  q.quant = Quant::kFp16;
  CHECK(c.allReduce(buf.data(), buf.data(), 4, DataType::kFloat16, RedOp::kSum, q).status().code() ==
        Code::kInvalidArgument);  // fp16 is not narrower than float16
  q.quant = static_cast<Quant>(7);
  CHECK(c.allReduce(buf.data(), buf.data(), 4, DataType::kFloat32, RedOp::kSum, q).status().code() ==
        Code::kInvalidArgument);
  ReduceOptions z;
  for (int level : {-1, 20, 1000}) {
    z.compress = level;
    CHECK(c.allReduce(buf.data(), buf.data(), 4, DataType::kFloat32, RedOp::kSum, z).status().code() ==
          Code::kInvalidArgument);
  }
  ReduceOptions d;
  d.location = BufferLocation::kDevice;
  // This binary has no GPU backend module beside it (test_device_allreduce.cpp loads the host one).
  auto no_gpu = c.allReduce(buf.data(), buf.data(), 4, DataType::kFloat32, RedOp::kSum, d);
  CHECK(no_gpu.status().code() == Code::kUnsupported);
  CHECK_THAT(no_gpu.status().message(), Catch::Contains("GPU backend"));
  CHECK(c.allReduce(nullptr, nullptr, 0, DataType::kFloat32, RedOp::kSum).isOk());  // count 0: no buffers needed
  // Alone in the ring, avg of one peer is the input.
  auto r = c.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kAvg);
  REQUIRE(r.isOk());
  CHECK(r->world_size == 1);
  CHECK(buf == std::vector<float>(64, 1.0f));
  // Before connect(): InvalidUsage.
  CommConfig cfg = smallSegments();
  cfg.master_address = "127.0.0.1:" + std::to_string(cluster.master->port());
  auto idle = makeComm(cfg);
  REQUIRE(idle);
  CHECK(idle->allReduce(buf.data(), buf.data(), 4, DataType::kFloat32, RedOp::kSum).status().code() ==
        Code::kInvalidUsage);
}

TEST_CASE("allreduce: a peer joining meanwhile waits for the update and never disturbs running operations",
          "[allreduce]") {
  LocalCluster cluster = startCluster(2, smallSegments());
  REQUIRE(cluster.peers.size() == 2);
  CommConfig cfg = smallSegments();
  cfg.master_address = "127.0.0.1:" + std::to_string(cluster.master->port());
  auto joiner = makeComm(cfg);
  REQUIRE(joiner);
  auto joined = std::async(std::launch::async, [&] { return joiner->connect(); });
  REQUIRE(cluster.master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 5000));
  // Several operations while the joiner waits: all succeed with world 2.
  for (uint64_t tag = 0; tag < 5; ++tag) {
    std::vector<Status> st(2);
    std::vector<std::vector<float>> bufs(2, std::vector<float>(5000, 1.5f));
    cluster.onEach([&](size_t rank) {
      ReduceOptions o;
      o.tag = tag;
      auto r = cluster.peers[rank]->allReduce(bufs[rank].data(), bufs[rank].data(), 5000, DataType::kFloat32,
                                              RedOp::kSum, o);
      st[rank] = r.status();
      if (r.isOk() && r->world_size != 2) st[rank] = Status::internal("world size");
    });
    CHECK(st[0].isOk());
    CHECK(st[1].isOk());
    CHECK(bufs[0] == std::vector<float>(5000, 3.0f));
  }
  CHECK(*cluster.peers[0]->arePeersPending());
  REQUIRE(cluster.updateAll());
  REQUIRE(joined.get().isOk());
  cluster.peers.push_back(std::move(joiner));
  std::vector<std::vector<float>> bufs(3, std::vector<float>(777, 1.0f));
  cluster.onEach([&](size_t rank) {
    ReduceOptions o;
    o.tag = 99;
    (void)cluster.peers[rank]->allReduce(bufs[rank].data(), bufs[rank].data(), 777, DataType::kFloat32, RedOp::kSum, o);
  });
  for (auto& b : bufs) CHECK(b == std::vector<float>(777, 3.0f));
}

TEST_CASE("allreduce: the limits on operations in flight (peer and master) refuse the excess clearly", "[allreduce][limits]") {
  SECTION("peer: max_concurrent_ops") {
    CommConfig cfg = smallSegments();
    cfg.max_concurrent_ops = 2;
    LocalCluster c = startCluster(2, cfg);
    REQUIRE(c.peers.size() == 2);
    std::vector<float> a(1000, 1.0f), b(1000, 1.0f), extra(10, 1.0f);
    ReduceOptions o1, o2, o3;
    o1.tag = 1;
    o2.tag = 2;
    o3.tag = 3;
    auto h1 = c.peers[0]->allReduceAsync(a.data(), a.data(), a.size(), DataType::kFloat32, RedOp::kSum, o1);
    auto h2 = c.peers[0]->allReduceAsync(b.data(), b.data(), b.size(), DataType::kFloat32, RedOp::kSum, o2);
    REQUIRE(h1.isOk());
    REQUIRE(h2.isOk());
    auto h3 = c.peers[0]->allReduceAsync(extra.data(), extra.data(), extra.size(), DataType::kFloat32, RedOp::kSum, o3);
    REQUIRE_FALSE(h3.isOk());
    CHECK(h3.status().code() == Code::kInvalidUsage);
    CHECK_THAT(h3.status().message(), Catch::Contains("max_concurrent_ops"));
    std::vector<float> a1(1000, 1.0f), b1(1000, 1.0f);
    CHECK(c.peers[1]->allReduce(a1.data(), a1.data(), a1.size(), DataType::kFloat32, RedOp::kSum, o1).isOk());
    CHECK(c.peers[1]->allReduce(b1.data(), b1.data(), b1.size(), DataType::kFloat32, RedOp::kSum, o2).isOk());
    CHECK(h1->wait().isOk());
    CHECK(h2->wait().isOk());
    CHECK(a[0] == 2.0f);
    CommConfig bad = cfg;
    bad.max_concurrent_ops = 0;
    CHECK(Communicator::create(bad).status().code() == Code::kInvalidArgument);
  }
  SECTION("master: max_concurrent_ops over the whole run") {
    MasterConfig mc = fastMasterConfig();
    mc.max_concurrent_ops = 2;
    auto master = startMaster(mc);
    REQUIRE(master);
    CommConfig cfg = smallSegments();
    cfg.master_address = "127.0.0.1:" + std::to_string(master->port());
    auto p0 = makeComm(cfg), p1 = makeComm(cfg);
    REQUIRE(p0->connect().isOk());
    std::thread t([&] { CHECK(p1->connect().isOk()); });
    REQUIRE(master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 10000));
    REQUIRE(p0->updateTopology().isOk());
    t.join();
    // Peer 0 announces three operations; its partner has not yet: the third exceeds the master's limit.
    std::vector<float> x(100, 1.0f), y(100, 1.0f), z(100, 1.0f);
    ReduceOptions o;
    o.tag = 10;
    auto hx = p0->allReduceAsync(x.data(), x.data(), x.size(), DataType::kFloat32, RedOp::kSum, o);
    o.tag = 11;
    auto hy = p0->allReduceAsync(y.data(), y.data(), y.size(), DataType::kFloat32, RedOp::kSum, o);
    o.tag = 12;
    auto hz = p0->allReduceAsync(z.data(), z.data(), z.size(), DataType::kFloat32, RedOp::kSum, o);
    REQUIRE(hz.isOk());
    auto rz = hz->wait();
    REQUIRE_FALSE(rz.isOk());
    CHECK(rz.status().code() == Code::kInvalidUsage);
    CHECK_THAT(rz.status().message(), Catch::Contains("max_concurrent_ops"));
    CHECK(z[0] == 1.0f);  // untouched
    std::vector<float> x1(100, 1.0f), y1(100, 1.0f);
    o.tag = 10;
    CHECK(p1->allReduce(x1.data(), x1.data(), x1.size(), DataType::kFloat32, RedOp::kSum, o).isOk());
    o.tag = 11;
    CHECK(p1->allReduce(y1.data(), y1.data(), y1.size(), DataType::kFloat32, RedOp::kSum, o).isOk());
    CHECK(hx->wait().isOk());
    CHECK(hy->wait().isOk());
    CHECK(x[0] == 2.0f);
  }
}
