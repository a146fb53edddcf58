#include <cmath>
#include <cstring>
#include <map>

#include "bench.hpp"

namespace pccl::bench {

bool parseSize(const std::string& s, size_t* out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return false;
  const std::string unit(end);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") mult = 1024;
  else if (unit == "M" || unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

std::vector<size_t> sizesOf(const Options& o, size_t elem) {
  size_t lo = 0, hi = 0;
  parseSize(o.min_size, &lo);
  parseSize(o.max_size, &hi);
  std::vector<size_t> v;
  for (double s = static_cast<double>(std::max(lo, elem)); s <= static_cast<double>(hi) * 1.0000001; s *= o.factor) {
    v.push_back(static_cast<size_t>(s) / elem * elem);
    if (o.factor <= 1) break;
  }
  return v;
}

bool dtypeOf(const std::string& name, DataType* out) {
  static const std::map<std::string, DataType> kTypes = {
      {"int32", DataType::kInt32},       {"int64", DataType::kInt64},     {"float16", DataType::kFloat16},
      {"bfloat16", DataType::kBfloat16}, {"float32", DataType::kFloat32}, {"float64", DataType::kFloat64}};
  auto it = kTypes.find(name);
  if (it == kTypes.end()) return false;
  *out = it->second;
  return true;
}

size_t elemSize(DataType t) {
  switch (t) {
    case DataType::kFloat16: case DataType::kBfloat16: return 2;
    case DataType::kInt32: case DataType::kFloat32: return 4;
    default: return 8;
  }
}

namespace {
// Small non-negative integers (< 2^11) in every supported type, bit-exact, built by hand so that the
// bench needs nothing but the public API.
void store(DataType t, uint8_t* p, double v) {
  switch (t) {
    case DataType::kInt32: { const int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); return; }
    case DataType::kInt64: { const int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); return; }
    case DataType::kFloat32: { const float x = static_cast<float>(v); std::memcpy(p, &x, 4); return; }
    case DataType::kFloat64: std::memcpy(p, &v, 8); return;
    case DataType::kFloat16: case DataType::kBfloat16: {
      const float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      uint16_t h = 0;
      if (t == DataType::kBfloat16) {
        h = static_cast<uint16_t>(u >> 16);
      } else if (f != 0) {
        const uint32_t e = ((u >> 23) & 0xffu) - 127u + 15u;
        h = static_cast<uint16_t>((e << 10) | ((u >> 13) & 0x3ffu));
      }
      std::memcpy(p, &h, 2);
      return;
    }
    default: return;
  }
}
}  // namespace

void fillInput(DataType t, void* buf, size_t count, int rank) {
  auto* p = static_cast<uint8_t*>(buf);
  const size_t e = elemSize(t);
  for (size_t k = 0; k < count; ++k) store(t, p + k * e, static_cast<double>(rank + 1) + static_cast<double>(k % 7));
}

void fillExpected(DataType t, void* buf, size_t count, int world) {
  auto* p = static_cast<uint8_t*>(buf);
  const size_t e = elemSize(t);
  for (size_t k = 0; k < count; ++k) {
    store(t, p + k * e, world * (world + 1) / 2.0 + static_cast<double>(world) * static_cast<double>(k % 7));
  }
}

size_t countWrong(const void* got, const void* want, size_t count, size_t elem) {
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* w = static_cast<const uint8_t*>(want);
  if (std::memcmp(g, w, count * elem) == 0) return 0;
  size_t wrong = 0;
  for (size_t k = 0; k < count; ++k) wrong += std::memcmp(g + k * elem, w + k * elem, elem) != 0;
  return wrong;
}

namespace {
// A stateless generator: SplitMix64 of (rank, index), mapped to [-1, 1).
double unitValue(int rank, size_t k) {
  uint64_t z = (static_cast<uint64_t>(rank) << 40) ^ static_cast<uint64_t>(k);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}
}  // namespace

void fillRandom(float* buf, size_t count, int rank) {
  for (size_t k = 0; k < count; ++k) buf[k] = static_cast<float>(unitValue(rank, k));
}

void fillRandomExpected(float* buf, size_t count, int world, bool average) {
  for (size_t k = 0; k < count; ++k) {
    double s = 0;
    for (int r = 0; r < world; ++r) s += static_cast<double>(static_cast<float>(unitValue(r, k)));
    buf[k] = static_cast<float>(average ? s / world : s);
  }
}

double quantBound(const std::string& quant, int world, bool average, double abs_sum) {
  const double n = world;
  double u = 0;  // one quantization's error, relative to the block's sum of absolute values
  if (quant == "int8") u = 1.0 / 255;
  else if (quant == "fp4") u = 1.0 / 6;  // half the widest gap (4 to 6) of a scale amax / 6
  else if (quant == "bf16") u = 0x1.0p-8;
  else if (quant == "fp16") u = 0x1.0p-11;
  const double arithmetic = 4 * n * 0x1.0p-24;  // float32 additions and decoding, per hop
  const double sum = (n * u + arithmetic) * abs_sum + (quant == "fp16" ? n * 0x1.0p-25 : 0);
  return (average ? sum / n : sum) + 0x1.0p-24 * abs_sum;  // + rounding the float64 reference
}

size_t countOutside(const float* got, const float* want, size_t count, double bound, double* max_err) {
  size_t outside = 0;
  double worst = 0;
  for (size_t k = 0; k < count; ++k) {
    const double d = std::fabs(static_cast<double>(got[k]) - static_cast<double>(want[k]));
    if (!(d <= bound)) ++outside;  // NaN counts as outside
    worst = std::isnan(d) || d > worst ? d : worst;
  }
  *max_err = worst;
  return outside;
}

uint64_t hashBytes(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace pccl::bench
