// The ring the topology optimiser installs (issue 20): given what was measured of every ordered pair
// of peers (bandwidth and round-trip time; A->B and B->A are separate), the ring order that maximises
// the ring's bottleneck — the slowest link it uses, which caps every ring all-reduce — and, among the
// rings whose bottleneck is within `tolerance` of the best, the one with the least total latency.
// Pure functions, no I/O and no clocks (the work is bounded by iteration counts, so a result never
// depends on the machine's load).
//
// Exact up to `exact_limit` peers (16 by default: a dynamic programme over subsets, O(2^N N) per
// bottleneck probe and O(2^N N^2) for the latency, ~10 MB at 16). Above it a heuristic: the same
// binary search over bottleneck thresholds with a randomised Hamiltonian-cycle construction per probe,
// then a latency descent (Or-opt and 2-opt moves that keep every link above the threshold).
#ifndef PCCL_MASTER_RING_SOLVER_HPP_
#define PCCL_MASTER_RING_SOLVER_HPP_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pccl/status.hpp"

namespace pccl::master {

// Measured links, row-major by (from, to). A bandwidth of 0 (or below) means the link is unusable or
// was not measured: no ring uses it. The diagonal is ignored.
struct LinkMatrix {
  size_t n = 0;
  std::vector<double> bandwidth;  // bytes per second
  std::vector<double> rtt;        // seconds

  explicit LinkMatrix(size_t peers = 0) : n(peers), bandwidth(peers * peers, 0.0), rtt(peers * peers, 0.0) {}
  double bw(size_t from, size_t to) const { return bandwidth[from * n + to]; }
  double lat(size_t from, size_t to) const { return rtt[from * n + to]; }
  void set(size_t from, size_t to, double bytes_per_second, double rtt_seconds) {
    bandwidth[from * n + to] = bytes_per_second;
    rtt[from * n + to] = rtt_seconds;
  }
};

struct SolveOptions {
  double tolerance = 0.05;    // rings within this fraction of the best bottleneck compete on latency
  size_t exact_limit = 16;    // exact up to this many peers (at most 20), the heuristic above
  uint32_t attempts = 64;     // heuristic: randomised constructions per bottleneck probe
  uint32_t descent_rounds = 64;  // heuristic: passes of the latency descent
  uint64_t seed = 1;
};

struct RingChoice {
  std::vector<uint32_t> order;  // peer indices around the ring, starting with 0
  double bottleneck = 0;        // the slowest link of the ring (bytes per second)
  double latency = 0;           // the sum of its links' RTTs (seconds)
  bool exact = false;           // proven best (exact mode), else heuristic
};

// The slowest link and the total RTT of the ring `order` (every peer once; links order[i] ->
// order[i+1] and back to order[0]).
double ringBottleneck(const LinkMatrix& m, const std::vector<uint32_t>& order);
double ringLatency(const LinkMatrix& m, const std::vector<uint32_t>& order);

// InvalidArgument for a malformed matrix (sizes, NaN, a negative RTT) or options; TooFewPeers when
// the usable links admit no ring (naming a peer without a usable link in or out, when there is one).
// One peer: the ring {0}; two: {0, 1} (both links must be usable).
Result<RingChoice> solveRing(const LinkMatrix& m, const SolveOptions& options = {});

// The reference: every ring that starts with peer 0, (N-1)! of them, for at most 11 peers (pccl-solver-bench
// checks the exact mode against it). Same objective, same tolerance.
Result<RingChoice> bruteForceRing(const LinkMatrix& m, double tolerance = 0.05);

}  // namespace pccl::master

#endif  // PCCL_MASTER_RING_SOLVER_HPP_
