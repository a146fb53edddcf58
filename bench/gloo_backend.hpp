// Gloo (Debian's libgloo, TCP transport) beside pccl in the same processes: a full-mesh context
// through our TCP store, and timed all-reduces with Gloo's RING (the new gloo::allreduce API) and
// AllreduceRingChunked algorithms.
#ifndef PCCL_BENCH_GLOO_BACKEND_HPP_
#define PCCL_BENCH_GLOO_BACKEND_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pccl/types.hpp"

namespace pccl::bench {

class GlooBackend {
 public:
  // Rank `rank` of `size`: our own address is `my_host` (others connect to it); the store is at
  // store_host:store_port; `prefix` keeps this run's keys apart. Null with *error set on failure.
  static std::unique_ptr<GlooBackend> create(const std::string& store_host, uint16_t store_port,
                                             const std::string& my_host, int rank, int size,
                                             const std::string& prefix, std::string* error);
  ~GlooBackend();
  static bool supports(DataType t);
  static const std::vector<std::string>& algorithms();  // "ring", "ring_chunked"

  // One all-reduce (sum) of `count` elements from `send` into `recv` (they may be equal).
  bool allreduce(const std::string& algorithm, DataType t, const void* send, void* recv, size_t count,
                 std::string* error);
  bool barrier(std::string* error);
  // Gloo's broadcast (from rank 0, in place in `buf`) and allgather (new API).
  bool broadcast(DataType t, void* buf, size_t count, std::string* error);
  bool allgather(DataType t, const void* send, void* recv, size_t per_rank, std::string* error);
  // Frees what the last operations kept (AllreduceRingChunked's registered buffers and inboxes).
  void release();

 private:
  struct Impl;
  explicit GlooBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pccl::bench

#endif  // PCCL_BENCH_GLOO_BACKEND_HPP_
