// pccl-gpu-test: a GPU backend module's kernels against the CPU codec, bit for bit, through the ABI
// only (device_alloc, memcpy_async, the kernels, stream_synchronize).
//
//   pccl-gpu-test [--backend PATH] [--large-count N] [--variants N] [--verbose]
//
// PATH (or $PCCL_GPU_BACKEND) names the module; without either, libpccl-gpu-hip.so and then
// libpccl-gpu-cuda.so are tried beside this binary's build tree and on the loader's path.
// Every (quant, dtype, op) the CPU codec supports, and integer avg's partial sums, is run on counts 1, 4095, 4096, 4097, 3*4096+17 and
// 1<<20 (--large-count: fewer, at least 16 int8 blocks so that each pattern appears, for the emulated
// backend, whose small grid already has its loops stride at 3*4096+17), with int8 blocks of random values, +-0, subnormals, constants, all-negative values, NaN,
// +-Inf and ranges that overflow. The small counts run in every variant (the first block's pattern)
// unless --variants N takes the first N (the TSan tree: it looks at threads, not values). Exit codes: 0 all passed, 1 a check failed or the module could not be
// used, 77 skipped (the backend sees no GPU), 2 bad usage.
//
// One exception to bit-exactness, documented in docs/gpu.md: where both operands of a sum or product
// are NaN, the CPU's result carries whichever payload its compiler put first, so only "NaN" is checked.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codec/dtype.hpp"
#include "codec/gpu/loader.hpp"
#include "kernels/half.hpp"
#include "codec/partial_sum.hpp"
#include "codec/quant.hpp"
#include "codec/reduce.hpp"
#include "kernels/quant_math.hpp"

using namespace pccl;
using codec::DType;
using codec::Quant;
using codec::RedOp;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr int kSkipped = 77;
constexpr size_t kBlock = kernels::kInt8Block;
constexpr size_t kMaxCount = size_t{1} << 20;
constexpr size_t kWireSlack = 64;

// ---- inputs -----------------------------------------------------------------------------------------

// What an int8 block of the input holds; block b of variant v gets pattern (b + v) % kPatterns.
enum Pattern {
  kRandom,
  kZerosSubnormals,
  kConstant,
  kConstantZeros,
  kNegative,
  kNonNegativeZeros,
  kNonPositiveZeros,
  kNan,
  kInfinities,
  kPositiveInf,
  kOverflow,
  kAllInfinite,
  kSubnormalsOnly,
  kPatterns
};

struct Limits {
  double max;   // largest finite value of the type
  double tiny;  // a subnormal of the type (as stored)
};

Limits limitsOf(DType t) {
  switch (t) {
    case DType::kFloat16:
      return {65504.0, 3e-6};
    case DType::kBfloat16:
      return {3.3e38, 1e-39};
    case DType::kFloat32:
      return {3.4e38, 1e-40};
    default:
      return {1.7e308, 1e-310};
  }
}

// NaNs with different signs and payloads, quiet and signalling.
uint32_t nanBits32(std::mt19937_64& rng) {
  static constexpr uint32_t kBits[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fc12345u, 0xffa00000u};
  return kBits[rng() % 5];
}
uint64_t nanBits64(std::mt19937_64& rng) {
  static constexpr uint64_t kBits[] = {0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull,
                                       0x7ff8123456789abcull, 0xfff4000000000000ull};
  return kBits[rng() % 5];
}

// One element of pattern p (before rounding to the stored type).
double patternValue(Pattern p, std::mt19937_64& rng, size_t i, double scale, const Limits& lim) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const double inf = std::numeric_limits<double>::infinity();
  const double x = u(rng) * scale;
  switch (p) {
    case kRandom:
      return x;
    case kZerosSubnormals: {
      const int k = static_cast<int>(rng() % 4);
      return k == 0   ? 0.0
             : k == 1 ? -0.0
             : k == 2 ? lim.tiny * static_cast<double>(1 + rng() % 7) * (x < 0 ? -1 : 1)
                      : x;
    }
    case kConstant:
      return 3.25 * scale;
    case kConstantZeros:
      return rng() % 2 ? 0.0 : -0.0;
    case kNegative:
      return -(std::abs(x) + scale * 0.01);
    case kNonNegativeZeros:
      return rng() % 3 == 0 ? (rng() % 2 ? 0.0 : -0.0) : std::abs(x);
    case kNonPositiveZeros:
      return rng() % 3 == 0 ? (rng() % 2 ? 0.0 : -0.0) : -std::abs(x);
    case kNan:
      return rng() % 50 == 0 ? std::numeric_limits<double>::quiet_NaN() : x;  // replaced in store
    case kInfinities:
      return rng() % 40 == 0 ? (rng() % 2 ? inf : -inf) : (rng() % 10 == 0 ? -0.0 : x);
    case kPositiveInf:
      return rng() % 40 == 0 ? inf : std::abs(x);
    case kOverflow:
      return i == 3 ? lim.max : i == 7 ? -lim.max : x;
    case kAllInfinite:
      return rng() % 2 ? inf : -inf;
    case kSubnormalsOnly:
      return lim.tiny * static_cast<double>(1 + rng() % 9) * (x < 0 ? -1 : 1);
    case kPatterns:
      break;
  }
  return x;
}

// Stores v as dtype t at p; make_nan stores one of the NaNs above instead.
void storeFloat(DType t, uint8_t* p, double v, std::mt19937_64& rng, bool make_nan) {
  if (t == DType::kFloat64) {
    const uint64_t nan = nanBits64(rng);
    if (make_nan) std::memcpy(&v, &nan, 8);
    std::memcpy(p, &v, 8);
    return;
  }
  float f = static_cast<float>(v);
  const uint32_t nan = nanBits32(rng);
  if (make_nan) std::memcpy(&f, &nan, 4);
  if (t == DType::kFloat32) {
    std::memcpy(p, &f, 4);
    return;
  }
  const uint16_t h = t == DType::kFloat16 ? kernels::floatToHalf(f) : kernels::floatToBf16(f);
  std::memcpy(p, &h, 2);
}

Bytes makeInput(DType t, size_t count, int variant, uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(variant) * 7919u + static_cast<uint64_t>(t));
  const size_t size = codec::dtypeSize(t);
  Bytes out(count * size);
  if (!codec::isFloating(t)) {
    for (size_t i = 0; i < count; ++i) {
      uint64_t v = rng();
      const int k = static_cast<int>(rng() % 16);  // extremes now and then: wrap-around, -1, 0, MIN
      if (k == 0) v = 0;
      if (k == 1) v = ~uint64_t{0};
      if (k == 2) v = uint64_t{1} << (8 * size - 1);
      if (k == 3) v = (uint64_t{1} << (8 * size - 1)) - 1;
      std::memcpy(out.data() + i * size, &v, size);  // little-endian: the low bytes
    }
    return out;
  }
  const Limits lim = limitsOf(t);
  for (size_t first = 0; first < count; first += kBlock) {
    const auto p = static_cast<Pattern>((first / kBlock + static_cast<size_t>(variant)) % kPatterns);
    const double scale = std::pow(10.0, static_cast<double>(static_cast<int>(rng() % 9) - 4));
    for (size_t i = first; i < count && i < first + kBlock; ++i) {
      const double v = patternValue(p, rng, i - first, scale, lim);
      storeFloat(t, out.data() + i * size, v, rng, p == kNan && v != v);
    }
  }
  return out;
}

// ---- the device -------------------------------------------------------------------------------------

struct Device {
  const pcclGpuBackend_t* api = nullptr;
  pcclGpuStream_t stream = nullptr;
  void* buf[4] = {};  // a, b, out, wire
  size_t bytes[4] = {};
  std::string error;

  bool ok(int rc, const char* what) {
    if (rc == PCCL_GPU_OK) return true;
    error = std::string(what) + " returned " + std::to_string(rc) + ": " + api->last_error();
    return false;
  }
  bool upload(int slot, const Bytes& b, size_t offset = 0) {
    return b.empty() || ok(api->memcpy_async(static_cast<uint8_t*>(buf[slot]) + offset, b.data(), b.size(),
                                             PCCL_GPU_COPY_H2D, stream),
                           "memcpy H2D");
  }
  bool download(int slot, Bytes& b, size_t offset = 0) {
    return (b.empty() || ok(api->memcpy_async(b.data(), static_cast<uint8_t*>(buf[slot]) + offset, b.size(),
                                              PCCL_GPU_COPY_D2H, stream),
                            "memcpy D2H")) &&
           ok(api->stream_synchronize(stream), "stream_synchronize");
  }
  uint8_t* at(int slot, size_t offset = 0) const { return static_cast<uint8_t*>(buf[slot]) + offset; }
};

// ---- checking ---------------------------------------------------------------------------------------

struct Tally {
  int passed = 0;
  int failed = 0;
  bool verbose = false;
};

bool isNanElement(DType t, const uint8_t* p) {
  switch (t) {
    case DType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7fffu) > 0x7c00u;
    }
    case DType::kBfloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7fffu) > 0x7f80u;
    }
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f != f;
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d != d;
    }
    default:
      return false;
  }
}

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[4];
  for (size_t i = n; i-- > 0;) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

// got == want byte for byte, elements of `size` bytes; where nan_pair[i], two NaNs also match.
void expectSame(Tally& t, const std::string& what, const Bytes& want, const Bytes& got, DType dtype, size_t size,
                const std::vector<bool>* nan_pair = nullptr) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i * size < want.size(); ++i) {
    const size_t n = std::min(size, want.size() - i * size);
    if (std::memcmp(want.data() + i * size, got.data() + i * size, n) == 0) continue;
    if (nan_pair != nullptr && (*nan_pair)[i] && isNanElement(dtype, want.data() + i * size) &&
        isNanElement(dtype, got.data() + i * size)) {
      continue;
    }
    if (bad++ == 0) first = i;
  }
  if (bad == 0) {
    ++t.passed;
    if (t.verbose) std::printf("ok   %s\n", what.c_str());
    return;
  }
  ++t.failed;
  const size_t n = std::min(size, want.size() - first * size);
  std::printf("FAIL %s: %zu of %zu elements differ; first at %zu: want %s got %s\n", what.c_str(), bad,
              want.size() / size, first, hex(want.data() + first * size, n).c_str(),
              hex(got.data() + first * size, n).c_str());
}

void expectRc(Tally& t, const std::string& what, bool good) {
  if (good) {
    ++t.passed;
  } else {
    ++t.failed;
    std::printf("FAIL %s\n", what.c_str());
  }
}

// nan_pair[i]: both operands of element i are NaN (their bytes as stored).
std::vector<bool> nanPairs(DType t, const Bytes& a, const Bytes& b) {
  const size_t size = codec::dtypeSize(t);
  std::vector<bool> v(a.size() / size, false);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = isNanElement(t, a.data() + i * size) && isNanElement(t, b.data() + i * size);
  return v;
}

// ---- the cases --------------------------------------------------------------------------------------

struct Case {
  DType dtype;
  size_t count;
  int variant;
  std::string name() const {
    return std::string(codec::dtypeName(dtype)) + " count " + std::to_string(count) + " variant " +
           std::to_string(variant);
  }
};

// (op, divisor) pairs to run: avg with divisor 1 behaves as sum, with 7 divides.
struct OpRun {
  RedOp op;
  uint32_t divisor;
};
const OpRun kOpRuns[] = {{RedOp::kSum, 1},  {RedOp::kAvg, 1}, {RedOp::kAvg, 7},
                         {RedOp::kProd, 1}, {RedOp::kMin, 1}, {RedOp::kMax, 1}};

std::string opName(const OpRun& r) {
  return std::string(codec::redOpName(r.op)) + (r.divisor > 1 ? "/" + std::to_string(r.divisor) : "");
}

bool arithmetic(RedOp op) { return op == RedOp::kSum || op == RedOp::kAvg || op == RedOp::kProd; }

// reduce: acc := acc (op) in, every op.
void checkReduce(Device& d, Tally& t, const Case& c, const Bytes& a, const Bytes& b) {
  const size_t size = codec::dtypeSize(c.dtype);
  const auto pairs = nanPairs(c.dtype, a, b);
  for (const OpRun& r : kOpRuns) {
    const std::string what = "reduce " + opName(r) + " " + c.name();
    Bytes want = a;
    codec::reduceInto(c.dtype, r.op, want.data(), b.data(), c.count, r.divisor);
    Bytes got(want.size());
    if (!d.upload(0, a) || !d.upload(1, b) ||
        !d.ok(d.api->reduce(static_cast<int>(c.dtype), static_cast<int>(r.op), d.buf[0], d.buf[1], c.count, r.divisor,
                            d.stream),
              "reduce") ||
        !d.download(0, got)) {
      expectRc(t, what + ": " + d.error, false);
      continue;
    }
    expectSame(t, what, want, got, c.dtype, size, arithmetic(r.op) ? &pairs : nullptr);
  }
}

// encode, decode and decode_reduce of one quant. The int8 and fp4 wire sits at byte offset 0, 1 or 4
// (by variant): headers and scales need not be aligned.
void checkQuant(Device& d, Tally& t, Quant q, const Case& c, const Bytes& a, const Bytes& b) {
  const size_t size = codec::dtypeSize(c.dtype);
  const size_t wire_bytes = codec::wireBytes(q, c.dtype, c.count);
  const bool blocks = q == Quant::kInt8 || q == Quant::kFp4;
  const size_t off = blocks ? std::vector<size_t>{0, 1, 4}[static_cast<size_t>(c.variant) % 3] : 0;
  const std::string tag = std::string(codec::quantName(q)) + " " + c.name() + " wire+" + std::to_string(off);

  Bytes wire(wire_bytes);
  codec::encode(q, c.dtype, a.data(), c.count, wire.data());
  Bytes got_wire(wire_bytes);
  if (!d.upload(0, a) ||
      !d.ok(d.api->encode(static_cast<int>(q), static_cast<int>(c.dtype), d.buf[0], c.count, d.at(3, off), d.stream),
            "encode") ||
      !d.download(3, got_wire, off)) {
    expectRc(t, "encode " + tag + ": " + d.error, false);
    return;
  }
  expectSame(t, "encode " + tag, wire, got_wire, c.dtype, blocks ? 1 : size);

  // Decode the CPU's wire (and, for fp16/bf16, every 16-bit pattern at random).
  std::vector<Bytes> wires = {wire};
  if (q == Quant::kFp16 || q == Quant::kBf16) {
    std::mt19937_64 rng(c.count + static_cast<size_t>(c.variant));
    Bytes random(wire_bytes);
    for (auto& x : random) x = static_cast<uint8_t>(rng());
    wires.push_back(random);
  }
  for (size_t w = 0; w < wires.size(); ++w) {
    const std::string wtag = tag + (w > 0 ? " random wire" : "");
    Bytes decoded(c.count * size), got(c.count * size);
    codec::decode(q, c.dtype, wires[w].data(), c.count, decoded.data());
    if (!d.upload(3, wires[w], off) ||
        !d.ok(d.api->decode(static_cast<int>(q), static_cast<int>(c.dtype), d.at(3, off), c.count, d.buf[2], d.stream),
              "decode") ||
        !d.download(2, got)) {
      expectRc(t, "decode " + wtag + ": " + d.error, false);
      continue;
    }
    expectSame(t, "decode " + wtag, decoded, got, c.dtype, size);

    const auto pairs = nanPairs(c.dtype, decoded, b);
    for (const OpRun& r : kOpRuns) {
      if (!codec::checkQuant(q, c.dtype, r.op).isOk()) continue;
      const std::string what = "decode_reduce " + opName(r) + " " + wtag;
      Bytes want(c.count * size);
      codec::decodeReduce(q, c.dtype, r.op, wires[w].data(), c.count, b.data(), want.data(), r.divisor);
      if (!d.upload(1, b) ||
          !d.ok(d.api->decode_reduce(static_cast<int>(q), static_cast<int>(c.dtype), static_cast<int>(r.op),
                                     d.at(3, off), c.count, d.buf[1], d.buf[2], r.divisor, d.stream),
                "decode_reduce") ||
          !d.download(2, got)) {
        expectRc(t, what + ": " + d.error, false);
        continue;
      }
      expectSame(t, what, want, got, c.dtype, size, arithmetic(r.op) ? &pairs : nullptr);
    }
  }
}

// Integer avg's partial sums over `peers`: widen, add (in place, as the ring does) and finish, over a
// wire of arbitrary sums (so carries and the 128-bit division see every bit pattern).
void checkPartials(Device& d, Tally& t, const Case& c, const Bytes& a, const Bytes& b, uint32_t peers) {
  const int dt = static_cast<int>(c.dtype);
  const size_t wide = codec::partialSumSize(c.dtype, peers);
  const std::string name = c.name() + " peers " + std::to_string(peers);
  Bytes want(c.count * wide), got(want.size());
  codec::widenToPartials(c.dtype, peers, a.data(), c.count, want.data());
  bool ran = d.upload(0, a) &&
             d.ok(d.api->widen_partials(dt, peers, d.buf[0], c.count, d.buf[3], d.stream), "widen_partials") &&
             d.download(3, got);
  if (ran) expectSame(t, "widen_partials " + name, want, got, c.dtype, wide);
  const Bytes sums = makeInput(DType::kUint8, c.count * wide, c.variant, 3);
  codec::addToPartials(c.dtype, peers, sums.data(), b.data(), c.count, want.data());
  ran = ran && d.upload(3, sums) && d.upload(1, b) &&
        d.ok(d.api->add_partials(dt, peers, d.buf[3], d.buf[1], c.count, d.buf[3], d.stream), "add_partials") &&
        d.download(3, got);
  if (ran) expectSame(t, "add_partials " + name, want, got, c.dtype, wide);
  Bytes out(c.count * codec::dtypeSize(c.dtype)), out_got(out.size());
  codec::finishPartials(c.dtype, peers, sums.data(), b.data(), c.count, out.data());
  ran = ran && d.upload(3, sums) &&
        d.ok(d.api->finish_partials(dt, peers, d.buf[3], d.buf[1], c.count, d.buf[2], d.stream), "finish_partials") &&
        d.download(2, out_got);
  if (ran) expectSame(t, "finish_partials " + name, out, out_got, c.dtype, codec::dtypeSize(c.dtype));
  if (!ran) expectRc(t, "partial sums " + name + ": " + d.error, false);
}

void runCase(Device& d, Tally& t, const Case& c) {
  const Bytes a = makeInput(c.dtype, c.count, c.variant, 1);
  const Bytes b = makeInput(c.dtype, c.count, c.variant + 5, 2);
  checkReduce(d, t, c, a, b);
  if (!codec::isFloating(c.dtype)) {
    // Every sum width: 2, 4 and 8 bytes for 8-bit elements, 4 and 8 for 16-bit ones; odd divisors.
    for (uint32_t peers : {3u, 300u, 70001u, (1u << 24) + 3}) checkPartials(d, t, c, a, b, peers);
  }
  for (Quant q : {Quant::kNone, Quant::kFp16, Quant::kBf16, Quant::kInt8, Quant::kFp4}) {
    if (codec::checkQuant(q, c.dtype, RedOp::kSum).isOk()) checkQuant(d, t, q, c, a, b);
  }
}

// The ABI around the kernels: pointer kinds, bad arguments, empty calls.
void checkAbi(Device& d, Tally& t) {
  const pcclGpuBackend_t& api = *d.api;
  int dev = -2;
  expectRc(t, "pointer_device of device memory is a device",
           api.pointer_device(d.buf[0], &dev) == PCCL_GPU_OK && dev >= 0);
  if (std::string(api.name) != "host") {  // the host backend's "device" memory is host memory
    std::vector<uint8_t> heap(64);
    dev = -2;
    expectRc(t, "pointer_device of malloc memory is -1",
             api.pointer_device(heap.data(), &dev) == PCCL_GPU_OK && dev == -1);
    void* pinned = nullptr;
    dev = -2;
    expectRc(t, "host_alloc gives pinned host memory (-1)",
             api.host_alloc(&pinned, 4096) == PCCL_GPU_OK && api.pointer_device(pinned, &dev) == PCCL_GPU_OK &&
                 dev == -1 && api.host_free(pinned) == PCCL_GPU_OK);
  }
  expectRc(t, "encode refuses an unknown quant",
           api.encode(9, 10, d.buf[0], 8, d.buf[3], d.stream) != PCCL_GPU_OK && api.last_error()[0] != '\0');
  expectRc(t, "reduce refuses an unknown dtype", api.reduce(99, 0, d.buf[0], d.buf[1], 8, 1, d.stream) != PCCL_GPU_OK);
  expectRc(t, "reduce refuses an unknown op", api.reduce(10, 42, d.buf[0], d.buf[1], 8, 1, d.stream) != PCCL_GPU_OK);
  expectRc(t, "finish_partials refuses a floating dtype and zero peers",
           api.finish_partials(10, 2, d.buf[3], d.buf[1], 8, d.buf[2], d.stream) != PCCL_GPU_OK &&
               api.finish_partials(0, 0, d.buf[3], d.buf[1], 8, d.buf[2], d.stream) != PCCL_GPU_OK);
  expectRc(t, "widen_partials refuses an unknown dtype",
           api.widen_partials(99, 2, d.buf[0], 8, d.buf[3], d.stream) != PCCL_GPU_OK);
  expectRc(t, "empty calls succeed",
           api.encode(3, 10, d.buf[0], 0, d.buf[3], d.stream) == PCCL_GPU_OK &&
               api.decode(3, 10, d.buf[3], 0, d.buf[2], d.stream) == PCCL_GPU_OK &&
               api.reduce(10, 0, d.buf[0], d.buf[1], 0, 1, d.stream) == PCCL_GPU_OK &&
               api.memcpy_async(d.buf[0], d.buf[1], 0, PCCL_GPU_COPY_D2D, d.stream) == PCCL_GPU_OK &&
               api.stream_synchronize(d.stream) == PCCL_GPU_OK);
}

// ---- main -------------------------------------------------------------------------------------------

std::string besideBuildTree(const char* argv0, const char* name) {
  std::string exe = argv0;
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? std::string("../src/") + name : exe.substr(0, slash) + "/../src/" + name;
}

Result<const pcclGpuBackend_t*> load(const std::string& flag, const char* argv0) {
  const char* env = std::getenv("PCCL_GPU_BACKEND");
  if (!flag.empty()) return codec::gpu::loadBackend(flag);
  if (env != nullptr && *env != '\0') return codec::gpu::loadBackend(env);
  std::string tried;
  for (const char* name : {"libpccl-gpu-hip.so", "libpccl-gpu-cuda.so"}) {
    for (const std::string& p : {besideBuildTree(argv0, name), std::string(name)}) {
      auto r = codec::gpu::loadBackend(p);
      if (r.isOk()) return r;
      tried += "\n  " + r.status().message();
    }
  }
  return Status::unsupported("no GPU backend module found:" + tried);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  size_t large_count = kMaxCount;
  int variants = kPatterns;
  Tally tally;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--backend" && i + 1 < argc) {
      path = argv[++i];
    } else if (arg == "--large-count" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || n < kPatterns * kBlock || n > kMaxCount) {
        std::fprintf(stderr, "%s: --large-count takes %zu to %zu\n", argv[0], kPatterns * kBlock, kMaxCount);
        return 2;
      }
      large_count = static_cast<size_t>(n);
    } else if (arg == "--variants" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long n = std::strtoul(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || n < 1 || n > static_cast<unsigned long>(kPatterns)) {
        std::fprintf(stderr, "%s: --variants takes 1 to %d\n", argv[0], static_cast<int>(kPatterns));
        return 2;
      }
      variants = static_cast<int>(n);
    } else if (arg == "--verbose") {
      tally.verbose = true;
    } else {
      std::fprintf(stderr, "usage: %s [--backend PATH] [--large-count N] [--variants N] [--verbose]\n", argv[0]);
      return 2;
    }
  }
  auto loaded = load(path, argv[0]);
  if (!loaded.isOk()) {
    std::printf("pccl-gpu-test: %s\n", loaded.status().message().c_str());
    return path.empty() ? kSkipped : 1;  // nothing named: nothing to test
  }
  Device d;
  d.api = loaded.value();
  int devices = 0;
  const int rc = d.api->device_count(&devices);
  if (rc == PCCL_GPU_NO_DEVICE || (rc == PCCL_GPU_OK && devices == 0)) {
    std::printf("pccl-gpu-test: skipped: the %s backend sees no GPU (%s)\n", d.api->name, d.api->last_error());
    return kSkipped;
  }
  // The wire holds up to 16 bytes per element (int64/uint64 partial sums).
  const size_t caps[4] = {kMaxCount * 8, kMaxCount * 8, kMaxCount * 8, kMaxCount * 16 + kWireSlack};
  bool ready = d.ok(rc, "device_count") && d.ok(d.api->set_device(0), "set_device") &&
               d.ok(d.api->stream_create(&d.stream), "stream_create");
  for (int s = 0; ready && s < 4; ++s) ready = d.ok(d.api->device_alloc(&d.buf[s], caps[s]), "device_alloc");
  if (!ready) {
    std::printf("pccl-gpu-test: the %s backend failed: %s\n", d.api->name, d.error.c_str());
    return 1;
  }
  std::printf("pccl-gpu-test: %s backend, %d device(s)\n", d.api->name, devices);
  checkAbi(d, tally);
  for (uint8_t t = 0; t < codec::kDTypeCount; ++t) {
    const auto dtype = static_cast<DType>(t);
    for (size_t count : {size_t{1}, kBlock - 1, kBlock, kBlock + 1, 3 * kBlock + 17}) {
      for (int v = 0; v < variants; ++v) runCase(d, tally, {dtype, count, v});
    }
    runCase(d, tally, {dtype, large_count, 0});  // every pattern, 256 blocks by default
    std::printf("  %-8s done (%d passed, %d failed so far)\n", codec::dtypeName(dtype), tally.passed, tally.failed);
    std::fflush(stdout);
  }
  for (void* p : d.buf) static_cast<void>(d.api->device_free(p));
  static_cast<void>(d.api->stream_destroy(d.stream));
  std::printf("%d passed, %d failed\n", tally.passed, tally.failed);
  return tally.failed == 0 ? 0 : 1;
}
