#include "timeline.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace pccl::wanem {

namespace {
constexpr size_t kLinear = 40;  // 25 µs buckets below 1 ms
constexpr double kLinearUs = 25, kGrowth = 1.4;

size_t bucketOf(double us) {
  if (us < kLinear * kLinearUs) return static_cast<size_t>(std::max(0.0, us) / kLinearUs);
  const double k = std::floor(std::log(us / (kLinear * kLinearUs)) / std::log(kGrowth));
  return std::min(LateHist::kBuckets - 1, kLinear + static_cast<size_t>(k));
}
double upperEdge(size_t i) {
  if (i < kLinear) return static_cast<double>(i + 1) * kLinearUs;
  return kLinear * kLinearUs * std::pow(kGrowth, static_cast<double>(i - kLinear + 1));
}
}  // namespace

void LateHist::add(double us) {
  c_[bucketOf(us)] += 1;
  max_ = std::max(max_, us);
}

void LateHist::merge(const LateHist& o) {
  for (size_t i = 0; i < kBuckets; ++i) c_[i] += o.c_[i];
  max_ = std::max(max_, o.max_);
}

uint64_t LateHist::count() const {
  uint64_t n = 0;
  for (uint32_t c : c_) n += c;
  return n;
}

double LateHist::quantile(double q) const {
  const uint64_t n = count();
  if (n == 0) return 0;
  const auto want = static_cast<uint64_t>(std::ceil(q * static_cast<double>(n)));
  uint64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += c_[i];
    if (seen >= want) return std::min(upperEdge(i), max_);
  }
  return max_;
}

void Bin::merge(const Bin& o) {
  packets += o.packets;
  segments += o.segments;
  bytes += o.bytes;
  lost_random += o.lost_random;
  queue_drops += o.queue_drops;
  emulator_drops += o.emulator_drops;
  late.merge(o.late);
  tun_wait.merge(o.tun_wait);
  wake.merge(o.wake);
}

Bin& Timeline::at(int64_t t_ns) {
  const auto i = static_cast<size_t>(std::max<int64_t>(0, t_ns - origin_ns_) / kBinNs);
  if (i >= bins_.size()) bins_.resize(i + 1);
  return bins_[i];
}

Bin Timeline::sum(const std::vector<std::pair<int64_t, int64_t>>& intervals) const {
  std::vector<bool> in(bins_.size(), false);
  for (const auto& [b, e] : intervals) {
    const int64_t lo = std::max<int64_t>(0, b - origin_ns_) / kBinNs, hi = std::max<int64_t>(0, e - origin_ns_) / kBinNs;
    for (int64_t i = lo; i <= hi && i < static_cast<int64_t>(in.size()); ++i) in[static_cast<size_t>(i)] = true;
  }
  Bin s;
  for (size_t i = 0; i < bins_.size(); ++i) {
    if (in[i]) s.merge(bins_[i]);
  }
  return s;
}

Bin Timeline::total() const {
  Bin s;
  for (const auto& b : bins_) s.merge(b);
  return s;
}

Verdict judge(std::string label, const Bin& b) {
  Verdict v;
  v.label = std::move(label);
  v.bin = b;
  std::ostringstream why;
  if (b.emulator_drops != 0) why << b.emulator_drops << " packet(s) lost by the emulator; ";
  if (b.late.quantile(0.99) > kMaxLateP99Us) why << "p99 lateness " << b.late.quantile(0.99) << " us > 1 ms; ";
  if (b.late.max() > kMaxLateUs) why << "a packet " << b.late.max() << " us late (> 10 ms); ";
  if (b.wake.quantile(0.99) > kMaxWakeP99Us) why << "reader wake-up p99 " << b.wake.quantile(0.99) << " us > 1 ms; ";
  v.why = why.str();
  if (!v.why.empty()) v.why.resize(v.why.size() - 2);
  v.faithful = v.why.empty();
  return v;
}

std::vector<std::pair<std::string, std::vector<std::pair<int64_t, int64_t>>>> readPhases(const std::string& path,
                                                                                           size_t* bad) {
  std::vector<std::pair<std::string, std::vector<std::pair<int64_t, int64_t>>>> out;
  *bad = 0;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("begin ", 0) == 0) continue;  // a start mark (faults' `at phase+D`), not a phase
    std::istringstream in(line);
    std::string label;
    int64_t b = 0, e = 0;
    if (!(in >> label >> b >> e) || e < b) {
      *bad += !line.empty();
      continue;
    }
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == label; });
    if (it == out.end()) it = out.insert(out.end(), {label, {}});
    it->second.emplace_back(b, e);
  }
  return out;
}

}  // namespace pccl::wanem
