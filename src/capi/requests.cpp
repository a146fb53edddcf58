// Requests of asynchronous all-reduces: wait (with or without a time limit) and test.
#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "capi/args.hpp"
#include "capi/errors.hpp"
#include "capi/handles.hpp"

using pccl::capi::fail;
using pccl::capi::RequestEntry;

namespace {

// The live request `key`, or null after recording why not.
std::shared_ptr<RequestEntry> findRequest(uintptr_t key) {
  std::shared_ptr<RequestEntry> entry = pccl::capi::requests().find(key);
  if (!entry) (void)fail(pcclInvalidArgument, pccl::capi::badHandle(key, pccl::capi::HandleKind::kRequest));
  return entry;
}

// Hands out the result of a request whose operation has ended and frees the request. Of waits racing
// on one request, exactly one gets the result; the others get pcclInvalidArgument.
pcclResult_t finish(uintptr_t key, const RequestEntry& r, pcclReduceInfo_t* info) {
  auto result = r.op.wait();  // at once: the operation has ended
  if (!pccl::capi::requests().remove(key)) {
    return fail(pcclInvalidArgument, "invalid request handle (freed by a pcclWait or pcclWaitFor on another thread)");
  }
  if (!result.isOk()) {
    const pcclResult_t code = pccl::capi::fromStatus(result.status());
    pccl::capi::rememberFailureOn(r.comm);
    return code;
  }
  pccl::capi::reduceInfoTo(*result, info);
  return pcclSuccess;
}

}  // namespace

extern "C" {

pcclResult_t pcclWait(pcclRequest_t req, pcclReduceInfo_t* info) {
  return pccl::capi::guarded([&]() -> pcclResult_t {
    const uintptr_t key = pccl::capi::valueOf(req);
    const std::shared_ptr<RequestEntry> entry = findRequest(key);
    if (!entry) return pcclInvalidArgument;
    (void)entry->op.wait();  // no deadline here: the operation itself ends by op_timeout_ms
    return finish(key, *entry, info);
  });
}

pcclResult_t pcclWaitFor(pcclRequest_t* req, uint32_t timeout_ms, pcclReduceInfo_t* info) {
  return pccl::capi::guarded([&]() -> pcclResult_t {
    PCCL_CHECK_PTR(req);
    const uintptr_t key = pccl::capi::valueOf(*req);
    const std::shared_ptr<RequestEntry> entry = findRequest(key);
    if (!entry) return pcclInvalidArgument;
    if (!entry->op.waitFor(std::chrono::milliseconds(timeout_ms))) {
      (void)fail(pcclTimeout, fmt::format("the all-reduce of tag {} has not ended within {} ms; it goes on and the "
                                          "request is still valid",
                                          entry->tag, timeout_ms));
      pccl::capi::rememberFailureOn(entry->comm);
      return pcclTimeout;
    }
    const pcclResult_t r = finish(key, *entry, info);
    *req = nullptr;  // freed by this call, or (racing another wait) by the other one
    return r;
  });
}

pcclResult_t pcclTest(pcclRequest_t req, int* done) {
  return pccl::capi::guarded([&]() -> pcclResult_t {
    PCCL_CHECK_PTR(done);
    const std::shared_ptr<RequestEntry> entry = findRequest(pccl::capi::valueOf(req));
    if (!entry) return pcclInvalidArgument;
    *done = entry->op.test() ? 1 : 0;
    return pcclSuccess;
  });
}

}  // extern "C"
