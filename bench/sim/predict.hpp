// One pccl-bench row, simulated: on the scenario's network and ring, `warmup + iterations` operations of
// one algorithm, each preceded on every member by the one-element all-reduce that pccl-bench lines the
// ranks up with (each member calls the operation when its own line-up returns, as pccl-bench's ranks
// do). A timed operation's time is, as pccl-bench reports it, the slowest member's own call time; the
// row's time the median over the timed ones.
#ifndef PCCL_SIM_PREDICT_HPP_
#define PCCL_SIM_PREDICT_HPP_

#include <cstdint>
#include <vector>

#include "scenario.hpp"
#include "schedules.hpp"

namespace pccl::sim {

struct RunSpec {
  int warmup = 1, iterations = 1;
  bool line_up = true;      // without: every member calls at once (time 0, then when its previous call ends)
  uint64_t gather_bytes = 0;  // the library's gather limit, which the line-up's algorithm follows
};

struct Prediction {
  double time_s = 0;              // median over the timed operations of the slowest member's call
  std::vector<double> times_s;    // per timed operation, in order
  double data_in_s = 0;           // last timed operation: the slowest member's call until all its data was in
  double commit_s = 0;            // last timed operation: from the last member prepared to the last commit
  uint64_t max_sent_bytes = 0;    // last timed operation: the most payload one member sent
  double link_bound_s = 0;        // ring: 2(N-1)/N bytes over the ring's slowest link (payload rate);
                                  // two-level: the busiest ordered pair's payload over its rate; else 0
  uint64_t events = 0;            // the engine's, for the whole row
};

// `ring`: the network's peer at each group rank.
Prediction predict(const Scenario& s, const std::vector<uint32_t>& ring, const Model& m, const CallSpec& call,
                   Algorithm algorithm, const RunSpec& run);

}  // namespace pccl::sim

#endif  // PCCL_SIM_PREDICT_HPP_
