// All-reduces on device buffers (BufferLocation::kDevice) between real peers on loopback, through
// the GPU backend ABI. CI has no GPU, so this binary loads libpccl-gpu-host.so (the ABI on the CPU):
// everything libpccl does for device buffers — loading the module, pinned wire slots mirrored on the
// device, one engine job per segment, forwarding while decoding, in-place restore — runs for real;
// only the kernels are the CPU codec (their GPU versions are checked by pccl-gpu-test on a GPU).
// A peer killed in the middle of a device all-reduce: test_allreduce_faults.cpp.
//
// Because the module computes with the same codec as the host path, a device all-reduce must give
// the very bytes a host all-reduce gives, also with host and device peers mixed in one ring.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "reduce_reference.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

// Must happen before the first device call of the process (the loader caches its choice).
const bool kBackendSet = [] { return setenv("PCCL_GPU_BACKEND", PCCL_GPU_HOST_BACKEND, /*overwrite=*/0) == 0; }();

std::vector<float> input(size_t rank, size_t count, unsigned salt) { return randomFloats(rank * 104729 + salt, count); }

CommConfig config() {
  CommConfig c = fastCommConfig(0);
  c.segment_bytes = 16 << 10;  // many segments, so many device jobs in flight
  c.op_timeout_ms = 60000;
  return c;
}

struct DCase {
  Quant quant;
  RedOp op;
  int compress;
  size_t count;
  bool in_place;
};

std::vector<DCase> cases() {
  std::vector<DCase> v;
  for (Quant q : {Quant::kNone, Quant::kFp16, Quant::kBf16, Quant::kInt8}) {
    for (RedOp op : {RedOp::kSum, RedOp::kAvg}) {
      v.push_back({q, op, 0, 50000, false});
      v.push_back({q, op, 2, 9001, true});
    }
  }
  v.push_back({Quant::kNone, RedOp::kMax, 0, 3, true});
  return v;
}

// Runs every case once; `device(rank)` says which peers pass device buffers. results[case][rank].
std::vector<std::vector<std::vector<float>>> runAll(LocalCluster& cluster, const std::function<bool(size_t)>& device,
                                                    std::vector<std::string>& errors) {
  const auto cs = cases();
  const size_t world = cluster.peers.size();
  std::vector<std::vector<std::vector<float>>> out(cs.size(), std::vector<std::vector<float>>(world));
  cluster.onEach([&](size_t rank) {
    for (size_t i = 0; i < cs.size(); ++i) {
      const DCase& c = cs[i];
      std::vector<float> in = input(rank, c.count, static_cast<unsigned>(i));
      std::vector<float> res(c.count, -7.0f);
      ReduceOptions o;
      o.tag = 100 + i;
      o.quant = c.quant;
      o.compress = c.compress;
      o.location = device(rank) ? BufferLocation::kDevice : BufferLocation::kHost;
      float* dst = c.in_place ? in.data() : res.data();
      auto r = cluster.peers[rank]->allReduce(in.data(), dst, c.count, DataType::kFloat32, c.op, o);
      if (!r.isOk()) {
        errors[rank] += "case " + std::to_string(i) + ": " + r.status().toString() + "\n";
        continue;
      }
      out[i][rank] = c.in_place ? in : res;
    }
  });
  return out;
}

}  // namespace

TEST_CASE("device all-reduce: 3 peers, device buffers give the host path's bytes, every format, mixed rings",
          "[device][allreduce]") {
  REQUIRE(kBackendSet);
  const Path path = GENERATE(Path::kRing, Path::kGather);  // the gather path stages device buffers in host memory
  INFO(pathName(path));
  LocalCluster cluster = startCluster(3, onPath(config(), path));
  REQUIRE(cluster.peers.size() == 3);
  std::vector<std::string> errors(3);
  auto host = runAll(cluster, [](size_t) { return false; }, errors);
  auto dev = runAll(cluster, [](size_t) { return true; }, errors);
  auto mixed = runAll(cluster, [](size_t r) { return r != 1; }, errors);
  for (size_t r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].empty());
  }
  const auto cs = cases();
  for (size_t i = 0; i < cs.size(); ++i) {
    INFO("case " << i << " quant " << static_cast<int>(cs[i].quant) << " zstd " << cs[i].compress);
    for (size_t r = 0; r < 3; ++r) {
      REQUIRE(host[i][r].size() == cs[i].count);
      REQUIRE(dev[i][r].size() == cs[i].count);
      REQUIRE(mixed[i][r].size() == cs[i].count);
      const size_t bytes = cs[i].count * sizeof(float);
      CHECK(std::memcmp(host[i][r].data(), host[i][0].data(), bytes) == 0);
      CHECK(std::memcmp(dev[i][r].data(), host[i][0].data(), bytes) == 0);
      CHECK(std::memcmp(mixed[i][r].data(), host[i][0].data(), bytes) == 0);
    }
  }
  // A lossless sum of small integers is exact: check the values themselves once.
  std::vector<std::vector<float>> ints(3, std::vector<float>(1000));
  cluster.onEach([&](size_t rank) {
    for (size_t k = 0; k < ints[rank].size(); ++k) ints[rank][k] = static_cast<float>(rank * 1000 + k);
    ReduceOptions o;
    o.tag = 999;
    o.location = BufferLocation::kDevice;
    auto r = cluster.peers[rank]->allReduce(ints[rank].data(), ints[rank].data(), 1000, DataType::kFloat32,
                                            RedOp::kSum, o);
    CHECK(r.isOk());
  });
  for (size_t k = 0; k < 1000; ++k) REQUIRE(ints[2][k] == static_cast<float>(3000 + 3 * k));
}

// Integer avg's partial sums through the device path (widen, add and finish as device jobs): exact
// at the edges of the dtype, and the same bytes whether peers pass host or device buffers.
TEST_CASE("device all-reduce: integer avg at the edges is exact on device buffers and in mixed rings",
          "[device][allreduce]") {
  REQUIRE(kBackendSet);
  const Path path = GENERATE(Path::kRing, Path::kGather);
  INFO(pathName(path));
  LocalCluster cluster = startCluster(3, onPath(config(), path));
  REQUIRE(cluster.peers.size() == 3);
  constexpr size_t kCount = 9001;
  uint64_t tag = 2000;
  for (DataType t : {DataType::kInt8, DataType::kUint16, DataType::kInt32, DataType::kInt64, DataType::kUint64}) {
    for (int compress : {0, 1}) {
      for (int layout = 0; layout < 3; ++layout) {  // all host, all device, rank 1 on the host
        INFO(typeName(t) << " compress " << compress << " layout " << layout);
        std::vector<std::vector<uint8_t>> inputs(3), results(3);
        cluster.onEach([&](size_t rank) {
          inputs[rank] = integerEdgeInput(t, static_cast<uint32_t>(rank), kCount);
          results[rank] = inputs[rank];  // in place
          ReduceOptions o;
          o.tag = tag;
          o.compress = compress;
          const bool device = layout == 1 || (layout == 2 && rank != 1);
          o.location = device ? BufferLocation::kDevice : BufferLocation::kHost;
          auto r = cluster.peers[rank]->allReduce(results[rank].data(), results[rank].data(), kCount, t, RedOp::kAvg, o);
          CHECK(r.isOk());
        });
        ++tag;
        std::string first;
        CHECK(countWrong(t, RedOp::kAvg, inputs, results[0], kCount, &first) == 0);
        if (!first.empty()) WARN(first);
        CHECK(results[1] == results[0]);
        CHECK(results[2] == results[0]);
      }
    }
  }
}

TEST_CASE("device all-reduce: alone in the ring, out of place copies on the device", "[device][allreduce]") {
  REQUIRE(kBackendSet);
  LocalCluster cluster = startCluster(1, config());
  REQUIRE(cluster.peers.size() == 1);
  std::vector<float> in = input(0, 5000, 1), out(5000, 0.0f);
  ReduceOptions o;
  o.location = BufferLocation::kDevice;
  auto r = cluster.peers[0]->allReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum, o);
  INFO(r.status().toString());
  REQUIRE(r.isOk());
  CHECK(out == in);
}
