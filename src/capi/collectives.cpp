// The all-reduce's C API: the blocking call, and the asynchronous one that makes a request.
#include <memory>
#include <utility>

#include "capi/args.hpp"
#include "capi/calls.hpp"

using pccl::capi::CommEntry;
using pccl::capi::fail;
using pccl::capi::fromStatus;
using pccl::capi::onComm;

extern "C" {

pcclResult_t pcclAllReduce(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                           const pcclReduceOptions_t* opts, pcclComm_t comm, pcclReduceInfo_t* info) {
  // The communicator stays held until the operation ends, so a concurrent pcclCommDestroy cannot end it.
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    pccl::capi::ReduceArgs a;
    const pcclResult_t r = pccl::capi::reduceArgsFrom(dtype, op, opts, &a);
    if (r != pcclSuccess) return r;
    auto result = c.impl->allReduce(sendbuf, recvbuf, count, a.dtype, a.op, a.options);
    if (!result.isOk()) return fromStatus(result.status());
    pccl::capi::reduceInfoTo(*result, info);
    return pcclSuccess;
  });
}

pcclResult_t pcclAllReduceAsync(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype,
                                pcclRedOp_t op, const pcclReduceOptions_t* opts, pcclComm_t comm, pcclRequest_t* req) {
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    PCCL_CHECK_PTR(req);
    *req = nullptr;
    pccl::capi::ReduceArgs a;
    const pcclResult_t r = pccl::capi::reduceArgsFrom(dtype, op, opts, &a);
    if (r != pcclSuccess) return r;
    const uintptr_t key = pccl::capi::reserveHandle(pccl::capi::HandleKind::kRequest);
    if (key == 0) return fail(pcclSystemError, "no request handles left in this process");
    auto started = c.impl->allReduceAsync(sendbuf, recvbuf, count, a.dtype, a.op, a.options);
    if (!started.isOk()) return fromStatus(started.status());
    auto entry = std::make_shared<pccl::capi::RequestEntry>();
    entry->op = std::move(started).value();
    entry->comm = pccl::capi::valueOf(comm);
    entry->tag = a.options.tag;
    pccl::capi::requests().insert(key, std::move(entry));
    *req = pccl::capi::handleOf<pcclRequest>(key);
    return pcclSuccess;
  });
}

}  // extern "C"
