#ifndef PCCL_BENCH_WORKER_HPP_
#define PCCL_BENCH_WORKER_HPP_

#include "bench.hpp"

namespace pccl::bench {
// Runs one rank against the master in o.master until o.world ranks are in; returns the exit status.
int runWorker(const Options& o);
}  // namespace pccl::bench

#endif  // PCCL_BENCH_WORKER_HPP_
