// The pieces of the collective API that need no communicator state: ReduceHandle's shared state,
// and the checks every all-reduce's arguments get before anything is sent.
#ifndef PCCL_API_REDUCE_HANDLE_HPP_
#define PCCL_API_REDUCE_HANDLE_HPP_

#include <condition_variable>
#include <mutex>

#include "pccl/communicator.hpp"

namespace pccl {

struct ReduceHandle::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  ReduceInfo info;
};

// Types, pointers, sizes, overlap, and options this build cannot honour.
Status checkReduceArgs(const void* send, void* recv, size_t count, DataType dtype, RedOp op, const ReduceOptions& o);

}  // namespace pccl

#endif  // PCCL_API_REDUCE_HANDLE_HPP_
