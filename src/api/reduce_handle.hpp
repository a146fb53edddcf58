// The pieces of the collective API that need no communicator state: ReduceHandle's shared state,
// and the checks every all-reduce's arguments get before anything is sent.
#ifndef PCCL_API_REDUCE_HANDLE_HPP_
#define PCCL_API_REDUCE_HANDLE_HPP_

#include <condition_variable>
#include <mutex>

#include "pccl/communicator.hpp"
#include "wire/data.hpp"

namespace pccl {

struct ReduceHandle::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  ReduceInfo info;
};

// One collective call as the user made it. `count` is the user's: the all-reduce's and broadcast's
// elements, an all-gather's send count, a reduce-scatter's receive count (per rank); a barrier has none.
struct CollectiveCall {
  wire::Collective kind = wire::Collective::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  uint32_t root = 0;
  ReduceOptions options;
};

inline CollectiveCall collectiveCall(wire::Collective kind, const void* send, void* recv, size_t count, DataType dtype,
                                     RedOp op, uint32_t root, const ReduceOptions& options) {
  CollectiveCall c;
  c.kind = kind;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.dtype = dtype;
  c.op = op;
  c.root = root;
  c.options = options;
  return c;
}

// Types, operator and options, and what this build cannot honour.
Status checkCallOptions(const CollectiveCall& c);
// Where the call's input, output and in-place copy are, given our rank and the group's size.
struct CallLayout {
  size_t layout_count = 0;  // elements of the ring layout (OpDesc::count)
  size_t input_bytes = 0;   // what the call reads of `send`
  size_t output_bytes = 0;  // what it writes of `recv`
  bool in_place = false;    // it writes what it reads, or must undo its writes: it reads a saved copy, restored on failure
  uint8_t* restore_to = nullptr;  // in place: what a failure restores (restore_bytes from the copy + restore_from)
  size_t restore_from = 0, restore_bytes = 0;
};
// Pointers, sizes and overlap (the in-place forms of docs/c_api.md §Collectives).
Result<CallLayout> checkCallBuffers(const CollectiveCall& c, uint32_t rank, uint32_t world);

}  // namespace pccl

#endif  // PCCL_API_REDUCE_HANDLE_HPP_
