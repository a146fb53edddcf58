// pccl-bench --collective: what one operation of each collective reads, writes and must produce, for
// pccl and Gloo alike. A row's size is the larger buffer of a rank (all-gather: its output, reduce-
// scatter: its input), as nccl-tests count it; busbw scales algbw by the bytes every link must carry.
#ifndef PCCL_BENCH_COLLECTIVE_KIND_HPP_
#define PCCL_BENCH_COLLECTIVE_KIND_HPP_

#include <cstddef>
#include <cstdint>
#include <string>

#include "pccl/communicator.hpp"

namespace pccl::bench {

enum class CollectiveKind { kAllReduce, kBroadcast, kAllGather, kReduceScatter };
bool collectiveOf(const std::string& name, CollectiveKind* out);
const char* collectiveName(CollectiveKind k);

struct Layout {
  size_t per_rank = 0;    // elements: the all-gather's send count, the reduce-scatter's receive count
  size_t send_count = 0;  // elements each rank sends from
  size_t recv_count = 0;  // elements each rank's result has
  size_t bytes = 0;       // the row's size: the larger buffer, in bytes
};
// The layout of a row of `bytes` (rounded down to what splits into equal blocks; 0 elements: skip it).
Layout layoutOf(CollectiveKind k, size_t bytes, size_t elem, int world);
// algbw x this = busbw: 2(n-1)/n for the all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 for
// the broadcast.
double busFactor(CollectiveKind k, int world);

// Rank `rank`'s expected result (layout.recv_count elements) with the inputs of bench.hpp's fillInput:
// broadcasts come from rank 0.
void fillExpectedFor(CollectiveKind k, DataType t, void* buf, const Layout& l, int world, int rank);

// The same for quantized runs (float32 inputs of bench.hpp's fillRandom): the float64-accumulated reference.
void fillRandomExpectedFor(CollectiveKind k, float* buf, const Layout& l, int world, int rank);
// The results of every rank are the same bytes (not the reduce-scatter's blocks).
inline bool sameEverywhere(CollectiveKind k) { return k != CollectiveKind::kReduceScatter; }

// Where an operation reads and writes within the rank's send and recv buffers (in place: inside recv,
// whose input part is first copied from send), and where its result is.
struct Placement {
  const void* src = nullptr;
  void* dst = nullptr;
  const uint8_t* result = nullptr;
};
Placement place(CollectiveKind k, const Layout& l, size_t elem, int rank, bool in_place, const uint8_t* send,
                uint8_t* recv);

// `host` (of place() on send/recv, `bytes` each) moved to the device buffers dsend/drecv that mirror
// them. In place, the caller first copies the input there on the device: send_count elements from
// dsend to its src.
Placement onDevice(const Placement& host, const uint8_t* send, const uint8_t* recv, size_t bytes, void* dsend,
                   void* drecv);

// Starts one pccl operation (broadcasts from rank 0).
Result<ReduceHandle> startPccl(Communicator& comm, CollectiveKind k, const Placement& p, const Layout& l, DataType t,
                               const ReduceOptions& o);

}  // namespace pccl::bench

#endif  // PCCL_BENCH_COLLECTIVE_KIND_HPP_
