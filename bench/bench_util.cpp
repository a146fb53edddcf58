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

}  // namespace pccl::bench
