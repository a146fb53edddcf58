// Quantized and compressed all-reduces between real peers on loopback: every format, sum and avg,
// N = 2..7, against a float64 reference within the documented bound (docs/algorithms.md,
// "Quantization"), with every peer's result bit-identical.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/half.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

// The documented bound for N peers whose inputs' absolute values sum to at most `a` per element.
double bound(Quant q, RedOp op, size_t n, double a) {
  const double u = q == Quant::kInt8   ? 1.0 / 255
                   : q == Quant::kFp4  ? 1.0 / 6
                   : q == Quant::kBf16 ? 0x1.0p-8
                   : q == Quant::kFp16 ? 0x1.0p-11
                                       : 0;
  const double sum = (static_cast<double>(n) * u + 4.0 * static_cast<double>(n) * 0x1.0p-24) * a +
                     (q == Quant::kFp16 ? static_cast<double>(n) * 0x1.0p-25 : 0);
  return (op == RedOp::kAvg ? sum / static_cast<double>(n) : sum) + 0x1.0p-24 * a;
}

std::vector<float> input(size_t rank, size_t count, unsigned salt) { return randomFloats(rank * 7919 + salt, count); }

CommConfig config(uint32_t segment_bytes) {
  CommConfig c = fastCommConfig(0);
  c.segment_bytes = segment_bytes;
  c.op_timeout_ms = 60000;
  return c;
}

struct QCase {
  Quant quant;
  RedOp op;
  int compress;
  size_t count;
  bool in_place;
};

void runQuantized(size_t world, uint32_t segment_bytes, Path path) {
  INFO(pathName(path));
  LocalCluster cluster = startCluster(world, onPath(config(segment_bytes), path));
  REQUIRE(cluster.peers.size() == world);
  std::vector<QCase> cases;
  for (Quant q : {Quant::kFp16, Quant::kBf16, Quant::kInt8, Quant::kFp4}) {
    for (RedOp op : {RedOp::kSum, RedOp::kAvg}) {
      for (int z : {0, 3}) {
        for (size_t count : {size_t{1}, size_t{1001}, size_t{20000}}) cases.push_back({q, op, z, count, count == 1001});
      }
    }
  }
  cases.push_back({Quant::kNone, RedOp::kSum, 1, 30000, false});  // zstd alone is lossless
  std::vector<std::vector<std::vector<float>>> out(cases.size(), std::vector<std::vector<float>>(world));
  std::vector<std::string> errors(world);
  cluster.onEach([&](size_t rank) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const QCase& c = cases[i];
      std::vector<float> in = input(rank, c.count, static_cast<unsigned>(i));
      std::vector<float> res(c.count, -99.0f);
      ReduceOptions o;
      o.tag = i;
      o.quant = c.quant;
      o.compress = c.compress;
      float* dst = c.in_place ? in.data() : res.data();
      auto r = cluster.peers[rank]->allReduce(in.data(), dst, c.count, DataType::kFloat32, c.op, o);
      if (!r.isOk()) {
        errors[rank] += "case " + std::to_string(i) + ": " + r.status().toString() + "\n";
        continue;
      }
      // int8 on the wire: under half of float32's bytes (the gather path sends world - 1 inputs).
      const size_t inputs = path == Path::kGather ? world - 1 : 1;
      if (c.compress == 0 && c.quant == Quant::kInt8 && world > 1 && c.count > 1000 &&
          r->tx_bytes >= inputs * c.count * sizeof(float) / 2) {
        errors[rank] += "case " + std::to_string(i) + ": int8 sent " + std::to_string(r->tx_bytes) + " bytes\n";
      }
      // fp4: about a seventh of what float32 would send (4.5 bits an element: 36 bytes per 64 float32
      // elements; a ring sends 2(N-1)/N of the buffer), a few blocks cut short by segments aside.
      const double plain = path == Path::kGather ? static_cast<double>(inputs * c.count * sizeof(float))
                                                 : 2.0 * (world - 1) / world * c.count * sizeof(float);
      if (c.compress == 0 && c.quant == Quant::kFp4 && world > 1 && c.count > 1000 &&
          static_cast<double>(r->tx_bytes) * 6.8 >= plain) {
        errors[rank] += "case " + std::to_string(i) + ": fp4 sent " + std::to_string(r->tx_bytes) + " bytes\n";
      }
      out[i][rank] = c.in_place ? in : res;
    }
  });
  for (size_t r = 0; r < world; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].empty());
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const QCase& c = cases[i];
    INFO("world " << world << " case " << i << " quant " << static_cast<int>(c.quant) << " op "
                  << static_cast<int>(c.op) << " zstd " << c.compress << " count " << c.count);
    std::vector<std::vector<float>> ins;
    for (size_t r = 0; r < world; ++r) ins.push_back(input(r, c.count, static_cast<unsigned>(i)));
    for (size_t k = 0; k < c.count; ++k) {
      double s = 0, a = 0;
      for (size_t r = 0; r < world; ++r) {
        s += ins[r][k];
        a += std::fabs(ins[r][k]);
      }
      if (c.op == RedOp::kAvg) s /= static_cast<double>(world);
      const double err = std::fabs(static_cast<double>(out[i][0][k]) - s);
      // int8 blocks share a scale: their bound uses the largest sum of magnitudes, which is < world.
      const bool blocks = c.quant == Quant::kInt8 || c.quant == Quant::kFp4;  // a scale per block
      const double b = bound(c.quant, c.op, world, blocks ? static_cast<double>(world) : a);
      if (!(err <= b)) {
        FAIL_CHECK("element " << k << ": error " << err << " above the bound " << b);
        break;
      }
    }
    for (size_t r = 1; r < world; ++r) {
      REQUIRE(out[i][r].size() == c.count);
      CHECK(std::memcmp(out[i][r].data(), out[i][0].data(), c.count * sizeof(float)) == 0);  // bit-identical
    }
  }
}

}  // namespace

TEST_CASE("allreduce quant: 2 peers, every format, sum and avg, zstd on and off, ring and gather", "[allreduce][quant]") {
  for (Path p : {Path::kRing, Path::kGather}) runQuantized(2, 4096, p);
}
TEST_CASE("allreduce quant: 3 peers, every format, sum and avg, zstd on and off, ring and gather", "[allreduce][quant]") {
  for (Path p : {Path::kRing, Path::kGather}) runQuantized(3, 65536, p);
}
TEST_CASE("allreduce quant: 4 peers, every format, sum and avg, zstd on and off, ring and gather", "[allreduce][quant]") {
  for (Path p : {Path::kRing, Path::kGather}) runQuantized(4, 4096, p);
}
TEST_CASE("allreduce quant: 5 peers, every format, sum and avg, zstd on and off, ring and gather", "[allreduce][quant]") {
  for (Path p : {Path::kRing, Path::kGather}) runQuantized(5, 65536, p);
}
TEST_CASE("allreduce quant: 6 peers, every format, sum and avg, zstd on and off, ring and gather", "[allreduce][quant]") {
  for (Path p : {Path::kRing, Path::kGather}) runQuantized(6, 4096, p);
}
TEST_CASE("allreduce quant: 7 peers, every format, sum and avg, zstd on and off, ring and gather", "[allreduce][quant]") {
  for (Path p : {Path::kRing, Path::kGather}) runQuantized(7, 65536, p);
}

TEST_CASE("allreduce quant: int8 of float64 and bfloat16 data, min and max, 3 peers", "[allreduce][quant]") {
  LocalCluster cluster = startCluster(3, config(8192));
  REQUIRE(cluster.peers.size() == 3);
  const size_t n = 9000;
  std::vector<std::vector<double>> d(3);
  std::vector<std::vector<uint16_t>> b(3);
  std::vector<std::vector<float>> mx(3);
  std::vector<Status> st(3);
  cluster.onEach([&](size_t r) {
    std::vector<float> f = input(r, n, 99);
    d[r].assign(f.begin(), f.end());
    for (float x : f) b[r].push_back(kernels::floatToBf16(x));
    mx[r] = f;
    ReduceOptions o;
    o.quant = Quant::kInt8;
    o.tag = 1;
    auto r1 = cluster.peers[r]->allReduce(d[r].data(), d[r].data(), n, DataType::kFloat64, RedOp::kSum, o);
    o.tag = 2;
    auto r2 = cluster.peers[r]->allReduce(b[r].data(), b[r].data(), n, DataType::kBfloat16, RedOp::kAvg, o);
    o.tag = 3;
    auto r3 = cluster.peers[r]->allReduce(mx[r].data(), mx[r].data(), n, DataType::kFloat32, RedOp::kMax, o);
    st[r] = !r1.isOk() ? r1.status() : !r2.isOk() ? r2.status() : r3.status();
  });
  for (auto& s : st) CHECK(s.isOk());
  for (size_t k = 0; k < n; ++k) {
    double sum = 0, avg = 0;
    float m = -2;
    for (size_t r = 0; r < 3; ++r) {
      const float x = input(r, n, 99)[k];
      sum += x;
      avg += kernels::bf16ToFloat(kernels::floatToBf16(x)) / 3.0;
      m = std::max(m, x);
    }
    REQUIRE(std::fabs(d[0][k] - sum) <= 3 * 3.0 / 255 * 1.001);
    REQUIRE(std::fabs(kernels::bf16ToFloat(b[0][k]) - avg) <= 3.0 / 255 * 1.001 + 3 * 0x1.0p-8);
    REQUIRE(std::fabs(mx[0][k] - m) <= 3 * 2.0 / 255);  // max: each hop re-quantizes within its block's range
  }
  for (size_t r = 1; r < 3; ++r) {
    CHECK(d[r] == d[0]);
    CHECK(b[r] == b[0]);
    CHECK(std::memcmp(mx[r].data(), mx[0].data(), n * 4) == 0);
  }
}
