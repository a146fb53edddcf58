// Broadcast, all-gather and reduce-scatter on device buffers (BufferLocation::kDevice) between real
// peers on loopback, through libpccl-gpu-host.so (the GPU backend ABI on the CPU; see
// test_device_allreduce.cpp): the device steps of the ring (ring_device.cpp) run for real, one engine
// job per segment, with the CPU codec as kernels. Each call must give the very bytes the host path
// gives, also in rings mixing host and device peers. Peers killed mid-call: test_allreduce_faults.cpp.
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

constexpr size_t kWorld = 3;
constexpr uint32_t kRoot = 1;

CommConfig config() {
  CommConfig c = fastCommConfig(0);
  c.segment_bytes = 16 << 10;  // many segments, so many device jobs in flight
  c.op_timeout_ms = 60000;
  return c;
}

enum class Kind { kBroadcast, kAllGather, kReduceScatter };
const char* kindName(Kind k) {
  return k == Kind::kBroadcast ? "broadcast" : k == Kind::kAllGather ? "all-gather" : "reduce-scatter";
}

struct DCase {
  Kind kind;
  Quant quant;
  RedOp op;
  int compress;
  size_t count;  // the call's count: broadcast's elements, all-gather's send, reduce-scatter's recv
  bool in_place;
};

std::vector<DCase> cases() {
  std::vector<DCase> v;
  for (Kind k : {Kind::kBroadcast, Kind::kAllGather, Kind::kReduceScatter}) {
    for (Quant q : {Quant::kNone, Quant::kFp16, Quant::kBf16, Quant::kInt8}) {
      v.push_back({k, q, RedOp::kSum, 0, 20000, false});
      v.push_back({k, q, k == Kind::kReduceScatter ? RedOp::kAvg : RedOp::kSum, 2, 9001, true});
    }
    v.push_back({k, Quant::kNone, k == Kind::kReduceScatter ? RedOp::kMax : RedOp::kSum, 0, 3, true});
  }
  return v;
}

// The rank's buffers of one case: `io` holds the input (and, in place, the result), `out` the result
// out of place. Returns what the caller sees as the result afterwards (empty on failure).
std::vector<float> runCase(Communicator& c, const DCase& d, uint64_t tag, bool device, unsigned salt,
                           std::string& error) {
  const uint32_t rank = c.topology().group_rank;
  const size_t n = d.count;
  const size_t in_count = d.kind == Kind::kReduceScatter ? n * kWorld : n;
  const size_t out_count = d.kind == Kind::kAllGather ? n * kWorld : n;
  std::vector<float> mine = randomFloats(rank * 104729 + salt, in_count);
  ReduceOptions o;
  o.tag = tag;
  o.quant = d.quant;
  o.compress = d.compress;
  o.location = device ? BufferLocation::kDevice : BufferLocation::kHost;
  Result<ReduceInfo> r = Status::internal("not run");
  std::vector<float> buf, out(out_count, -7.0f);
  switch (d.kind) {
    case Kind::kBroadcast:
      buf = mine;
      r = d.in_place ? c.broadcast(buf.data(), buf.data(), n, DataType::kFloat32, kRoot, o)
                     : c.broadcast(rank == kRoot ? mine.data() : nullptr, out.data(), n, DataType::kFloat32, kRoot, o);
      if (d.in_place) out = buf;
      break;
    case Kind::kAllGather:
      if (d.in_place) {
        std::copy(mine.begin(), mine.end(), out.begin() + rank * n);
        r = c.allGather(out.data() + rank * n, out.data(), n, DataType::kFloat32, o);
      } else {
        r = c.allGather(mine.data(), out.data(), n, DataType::kFloat32, o);
      }
      break;
    case Kind::kReduceScatter:
      if (d.in_place) {
        r = c.reduceScatter(mine.data(), mine.data() + rank * n, n, DataType::kFloat32, d.op, o);
        out.assign(mine.begin() + rank * n, mine.begin() + (rank + 1) * n);
      } else {
        r = c.reduceScatter(mine.data(), out.data(), n, DataType::kFloat32, d.op, o);
      }
      break;
  }
  if (!r.isOk()) {
    error += std::string(kindName(d.kind)) + " tag " + std::to_string(tag) + ": " + r.status().toString() + "\n";
    return {};
  }
  return out;
}

// Every case once; `device(rank)` says which peers pass device buffers. results[case][rank].
std::vector<std::vector<std::vector<float>>> runAll(LocalCluster& cluster, const std::function<bool(size_t)>& device,
                                                    uint64_t tag_base, std::vector<std::string>& errors) {
  const auto cs = cases();
  std::vector<std::vector<std::vector<float>>> out(cs.size(), std::vector<std::vector<float>>(kWorld));
  cluster.onEach([&](size_t i) {
    Communicator& c = *cluster.peers[i];
    const size_t rank = c.topology().group_rank;
    for (size_t k = 0; k < cs.size(); ++k) {
      out[k][rank] = runCase(c, cs[k], tag_base + k, device(rank), static_cast<unsigned>(k), errors[rank]);
    }
  });
  return out;
}

}  // namespace

TEST_CASE("device collectives: 3 peers, broadcast, all-gather and reduce-scatter on device buffers give the host "
          "path's bytes, every format, in place and not, mixed rings",
          "[device][collectives]") {
  REQUIRE(kBackendSet);
  LocalCluster cluster = startCluster(kWorld, config());
  REQUIRE(cluster.peers.size() == kWorld);
  std::vector<std::string> errors(kWorld);
  auto host = runAll(cluster, [](size_t) { return false; }, 100, errors);
  auto dev = runAll(cluster, [](size_t) { return true; }, 200, errors);
  auto mixed = runAll(cluster, [](size_t r) { return r != kRoot; }, 300, errors);  // the root on the host
  auto mixed2 = runAll(cluster, [](size_t r) { return r == kRoot; }, 400, errors);
  for (size_t r = 0; r < kWorld; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].empty());
  }
  const auto cs = cases();
  for (size_t i = 0; i < cs.size(); ++i) {
    const DCase& d = cs[i];
    INFO("case " << i << ": " << kindName(d.kind) << " quant " << static_cast<int>(d.quant) << " zstd " << d.compress
                 << (d.in_place ? " in place" : ""));
    for (size_t r = 0; r < kWorld; ++r) {
      INFO("rank " << r);
      REQUIRE(!host[i][r].empty());
      CHECK(dev[i][r] == host[i][r]);  // the same floats; bytes below
      for (const auto* got : {&dev[i][r], &mixed[i][r], &mixed2[i][r]}) {
        REQUIRE(got->size() == host[i][r].size());
        CHECK(std::memcmp(got->data(), host[i][r].data(), got->size() * sizeof(float)) == 0);
      }
      // Broadcast and all-gather end with the same buffer everywhere.
      if (d.kind != Kind::kReduceScatter) {
        CHECK(std::memcmp(host[i][r].data(), host[i][0].data(), host[i][r].size() * sizeof(float)) == 0);
      }
    }
  }
  // Lossless, the values themselves: rank 1's data everywhere; every block in order; exact sums.
  const DCase& bc = cs[0];
  const DCase& ag = cs[9];
  const DCase& rs = cs[18];
  REQUIRE((bc.kind == Kind::kBroadcast && bc.quant == Quant::kNone && ag.kind == Kind::kAllGather &&
           ag.quant == Quant::kNone && rs.kind == Kind::kReduceScatter && rs.quant == Quant::kNone));
  const std::vector<float> root_in = randomFloats(kRoot * 104729 + 0, bc.count);
  for (size_t r = 0; r < kWorld; ++r) CHECK(dev[0][r] == root_in);
  for (size_t b = 0; b < kWorld; ++b) {
    const std::vector<float> block = randomFloats(b * 104729 + 9, ag.count);
    CHECK(std::equal(block.begin(), block.end(), dev[9][0].begin() + b * ag.count));
  }
}

// Integer avg's reduce-scatter carries exact partial sums (widened, added and finished as device jobs);
// the owner's last hop keeps the result and sends nothing.
TEST_CASE("device collectives: integer avg reduce-scatter at the edges is exact on device buffers and in mixed rings",
          "[device][collectives]") {
  REQUIRE(kBackendSet);
  LocalCluster cluster = startCluster(kWorld, config());
  REQUIRE(cluster.peers.size() == kWorld);
  constexpr size_t kCount = 3001;  // per rank
  uint64_t tag = 2000;
  for (DataType t : {DataType::kInt8, DataType::kInt32, DataType::kUint64}) {
    for (int layout = 0; layout < 3; ++layout) {  // all host, all device, rank 1 on the host
      INFO(typeName(t) << " layout " << layout);
      const size_t elem = sizeOf(t);
      std::vector<std::vector<uint8_t>> inputs(kWorld), results(kWorld);
      cluster.onEach([&](size_t i) {
        Communicator& c = *cluster.peers[i];
        const size_t rank = c.topology().group_rank;
        inputs[rank] = integerEdgeInput(t, static_cast<uint32_t>(rank), kCount * kWorld);
        results[rank].assign(kCount * elem, 0);
        ReduceOptions o;
        o.tag = tag;
        o.compress = layout == 1 ? 1 : 0;
        const bool device = layout == 1 || (layout == 2 && rank != 1);
        o.location = device ? BufferLocation::kDevice : BufferLocation::kHost;
        auto r = c.reduceScatter(inputs[rank].data(), results[rank].data(), kCount, t, RedOp::kAvg, o);
        CHECK(r.isOk());
      });
      ++tag;
      // The whole all-reduce's result, of which rank r holds block r.
      std::vector<uint8_t> whole(kCount * kWorld * elem);
      for (size_t r = 0; r < kWorld; ++r) std::memcpy(whole.data() + r * kCount * elem, results[r].data(), kCount * elem);
      std::string first;
      CHECK(countWrong(t, RedOp::kAvg, inputs, whole, kCount * kWorld, &first) == 0);
      if (!first.empty()) WARN(first);
    }
  }
}

TEST_CASE("device collectives: alone in the ring, each collective copies on the device, and a barrier with device "
          "location runs",
          "[device][collectives]") {
  REQUIRE(kBackendSet);
  LocalCluster cluster = startCluster(1, config());
  REQUIRE(cluster.peers.size() == 1);
  Communicator& c = *cluster.peers[0];
  const std::vector<float> in = randomFloats(5, 4000);
  ReduceOptions o;
  o.location = BufferLocation::kDevice;
  std::vector<float> out(4000, 0.0f);
  REQUIRE(c.broadcast(in.data(), out.data(), in.size(), DataType::kFloat32, 0, o).isOk());
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  REQUIRE(c.allGather(in.data(), out.data(), in.size(), DataType::kFloat32, o).isOk());
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  REQUIRE(c.reduceScatter(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum, o).isOk());
  CHECK(out == in);
  CHECK(c.barrier(o).isOk());
}
