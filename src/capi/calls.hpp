// How a C entry point that takes a handle runs: look the handle up (a handle that is not live is
// pcclInvalidArgument), hold its object for the whole call (so a concurrent destroy cannot free it
// underneath), catch every exception, and file a failure's detail under the communicator for the
// calling thread.
#ifndef PCCL_CAPI_CALLS_HPP_
#define PCCL_CAPI_CALLS_HPP_

#include <memory>

#include "capi/errors.hpp"
#include "capi/handles.hpp"

namespace pccl::capi {

// Runs fn(CommEntry&) on the live communicator `comm`.
template <typename Fn>
pcclResult_t onComm(pcclComm_t comm, Fn&& fn) {
  return guarded([&]() -> pcclResult_t {
    const uintptr_t key = valueOf(comm);
    const std::shared_ptr<CommEntry> entry = comms().find(key);
    if (!entry) return fail(pcclInvalidArgument, badHandle(key, HandleKind::kComm));
    const pcclResult_t r = guarded([&] { return fn(*entry); });
    if (r != pcclSuccess) rememberFailureOn(key);
    return r;
  });
}

// Runs fn(MasterEntry&) on the live master `master`.
template <typename Fn>
pcclResult_t onMaster(pcclMaster_t master, Fn&& fn) {
  return guarded([&]() -> pcclResult_t {
    const uintptr_t key = valueOf(master);
    const std::shared_ptr<MasterEntry> entry = masters().find(key);
    if (!entry) return fail(pcclInvalidArgument, badHandle(key, HandleKind::kMaster));
    return fn(*entry);
  });
}

}  // namespace pccl::capi

#endif  // PCCL_CAPI_CALLS_HPP_
