#include "predict.hpp"

#include <algorithm>
#include <limits>
#include <memory>

namespace pccl::sim {

namespace {
double ringBound(const Scenario& s, const Model& m, const std::vector<uint32_t>& ring, const CallSpec& call) {
  const size_t n = ring.size();
  if (n < 2) return 0;
  double slowest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const double r = linkParams(s, m, ring[i], ring[(i + 1) % n]).bytes_per_s;
    if (r > 0) slowest = std::min(slowest, r);
  }
  if (!(slowest < std::numeric_limits<double>::infinity())) return 0;
  const double bytes = static_cast<double>(call.count * call.elem_bytes);
  return 2.0 * static_cast<double>(n - 1) / static_cast<double>(n) * bytes / slowest;
}
// The busiest pair: the most payload one ordered pair of members carried in `op`, over its rate.
double pairBound(const Scenario& s, const Model& m, const std::vector<uint32_t>& ring, const Operation& op) {
  double bound = 0;
  const uint64_t n = ring.size();
  for (const auto& [pair, bytes] : op.pairBytes()) {
    const double rate = linkParams(s, m, ring[pair / n], ring[pair % n]).bytes_per_s;
    if (rate > 0) bound = std::max(bound, static_cast<double>(bytes) / rate);
  }
  return bound;
}
}  // namespace

Prediction predict(const Scenario& s, const std::vector<uint32_t>& ring, const Model& m, const CallSpec& call,
                   Algorithm algorithm, const RunSpec& run) {
  ScenarioLinks ctx{&s, &m};
  Engine engine(s.peers, m.engine, &ScenarioLinks::of, &ctx);
  CallSpec line = call;
  line.count = 1;
  line.elem_bytes = 4;  // pccl-bench's line-up: one float32, max
  const int total = std::max(1, run.warmup + run.iterations);
  // The calls each member makes in turn: [line-up, operation] per iteration (or the operations alone);
  // each member's end of one is its call of the next.
  std::vector<bool> is_line_up;
  for (int k = 0; k < total; ++k) {
    if (run.line_up) is_line_up.push_back(true);
    is_line_up.push_back(false);
  }
  std::vector<std::unique_ptr<Operation>> ops(is_line_up.size());
  std::vector<const Operation*> timed;
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation::MakeSchedule make = is_line_up[i] ? makeSchedule(libraryChoice(line, run.gather_bytes), line)
                                                 : makeSchedule(algorithm, call);
    auto next = [&ops, i](uint32_t rank, Time t) {
      if (i + 1 < ops.size()) ops[i + 1]->callAt(rank, t);
    };
    ops[i] = std::make_unique<Operation>(engine, ring, make, next);
    if (!is_line_up[i]) timed.push_back(ops[i].get());
  }
  for (uint32_t r = 0; r < ring.size(); ++r) ops[0]->callAt(r, 0);
  engine.run();

  Prediction p;
  p.events = engine.events();
  for (size_t k = static_cast<size_t>(run.warmup); k < timed.size(); ++k) {
    const Operation& op = *timed[k];
    double slowest = 0;
    for (const MemberTimes& t : op.times()) slowest = std::max(slowest, t.end - t.start);
    p.times_s.push_back(slowest);
  }
  std::vector<double> sorted = p.times_s;
  std::sort(sorted.begin(), sorted.end());
  p.time_s = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  const Operation& last = *timed.back();
  Time last_prepared = 0, last_end = 0;
  for (const MemberTimes& t : last.times()) {
    p.data_in_s = std::max(p.data_in_s, t.data_in - t.start);
    last_prepared = std::max(last_prepared, t.prepared);
    last_end = std::max(last_end, t.end);
  }
  p.commit_s = last_end - last_prepared;
  for (uint64_t b : last.sentBytes()) p.max_sent_bytes = std::max(p.max_sent_bytes, b);
  if (algorithm == Algorithm::kRing) p.link_bound_s = ringBound(s, m, ring, call);
  if (algorithm == Algorithm::kTwoLevel) p.link_bound_s = pairBound(s, m, ring, last);
  return p;
}

}  // namespace pccl::sim
