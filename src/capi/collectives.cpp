// The collectives' C API: each blocking call, and the asynchronous one that makes a request. Every
// collective goes through the same two helpers.
#include <memory>
#include <utility>

#include "capi/args.hpp"
#include "capi/calls.hpp"

using pccl::capi::CommEntry;
using pccl::capi::fail;
using pccl::capi::fromStatus;
using pccl::capi::onComm;

namespace {

// Checks the arguments, runs `call` (-> Result<ReduceInfo>) and fills *info. The communicator stays
// held until the operation ends, so a concurrent pcclCommDestroy cannot end it.
template <typename Call>
pcclResult_t blocking(pcclComm_t comm, const pcclDataType_t& dtype, const pcclRedOp_t& op,
                      const pcclReduceOptions_t* opts, pcclReduceInfo_t* info, Call call) {
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    pccl::capi::ReduceArgs a;
    const pcclResult_t r = pccl::capi::reduceArgsFrom(dtype, op, opts, &a);
    if (r != pcclSuccess) return r;
    auto result = call(*c.impl, a);
    if (!result.isOk()) return fromStatus(result.status());
    pccl::capi::reduceInfoTo(*result, info);
    return pcclSuccess;
  });
}

// Checks the arguments, starts `call` (-> Result<ReduceHandle>) and hands out its request.
template <typename Call>
pcclResult_t async(pcclComm_t comm, const pcclDataType_t& dtype, const pcclRedOp_t& op,
                   const pcclReduceOptions_t* opts, pcclRequest_t* req, Call call) {
  return onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    PCCL_CHECK_PTR(req);
    *req = nullptr;
    pccl::capi::ReduceArgs a;
    const pcclResult_t r = pccl::capi::reduceArgsFrom(dtype, op, opts, &a);
    if (r != pcclSuccess) return r;
    const uintptr_t key = pccl::capi::reserveHandle(pccl::capi::HandleKind::kRequest);
    if (key == 0) return fail(pcclSystemError, "no request handles left in this process");
    auto started = call(*c.impl, a);
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

// The collectives without an operator check it as sum.
const pcclRedOp_t kNoOp = pcclSum;
const pcclDataType_t kNoType = pcclFloat32;

}  // namespace

extern "C" {

pcclResult_t pcclAllReduce(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                           const pcclReduceOptions_t* opts, pcclComm_t comm, pcclReduceInfo_t* info) {
  return blocking(comm, dtype, op, opts, info, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.allReduce(sendbuf, recvbuf, count, a.dtype, a.op, a.options);
  });
}

pcclResult_t pcclAllReduceAsync(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype,
                                pcclRedOp_t op, const pcclReduceOptions_t* opts, pcclComm_t comm, pcclRequest_t* req) {
  return async(comm, dtype, op, opts, req, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.allReduceAsync(sendbuf, recvbuf, count, a.dtype, a.op, a.options);
  });
}

pcclResult_t pcclBroadcast(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype, uint32_t root,
                           const pcclReduceOptions_t* opts, pcclComm_t comm, pcclReduceInfo_t* info) {
  return blocking(comm, dtype, kNoOp, opts, info, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.broadcast(sendbuf, recvbuf, count, a.dtype, root, a.options);
  });
}

pcclResult_t pcclBroadcastAsync(const void* sendbuf, void* recvbuf, size_t count, pcclDataType_t dtype, uint32_t root,
                                const pcclReduceOptions_t* opts, pcclComm_t comm, pcclRequest_t* req) {
  return async(comm, dtype, kNoOp, opts, req, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.broadcastAsync(sendbuf, recvbuf, count, a.dtype, root, a.options);
  });
}

pcclResult_t pcclAllGather(const void* sendbuf, void* recvbuf, size_t sendcount, pcclDataType_t dtype,
                           const pcclReduceOptions_t* opts, pcclComm_t comm, pcclReduceInfo_t* info) {
  return blocking(comm, dtype, kNoOp, opts, info, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.allGather(sendbuf, recvbuf, sendcount, a.dtype, a.options);
  });
}

pcclResult_t pcclAllGatherAsync(const void* sendbuf, void* recvbuf, size_t sendcount, pcclDataType_t dtype,
                                const pcclReduceOptions_t* opts, pcclComm_t comm, pcclRequest_t* req) {
  return async(comm, dtype, kNoOp, opts, req, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.allGatherAsync(sendbuf, recvbuf, sendcount, a.dtype, a.options);
  });
}

pcclResult_t pcclReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, pcclDataType_t dtype,
                               pcclRedOp_t op, const pcclReduceOptions_t* opts, pcclComm_t comm,
                               pcclReduceInfo_t* info) {
  return blocking(comm, dtype, op, opts, info, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.reduceScatter(sendbuf, recvbuf, recvcount, a.dtype, a.op, a.options);
  });
}

pcclResult_t pcclReduceScatterAsync(const void* sendbuf, void* recvbuf, size_t recvcount, pcclDataType_t dtype,
                                    pcclRedOp_t op, const pcclReduceOptions_t* opts, pcclComm_t comm,
                                    pcclRequest_t* req) {
  return async(comm, dtype, op, opts, req, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.reduceScatterAsync(sendbuf, recvbuf, recvcount, a.dtype, a.op, a.options);
  });
}

pcclResult_t pcclBarrier(const pcclReduceOptions_t* opts, pcclComm_t comm) {
  return blocking(comm, kNoType, kNoOp, opts, nullptr, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.barrier(a.options);
  });
}

pcclResult_t pcclBarrierAsync(const pcclReduceOptions_t* opts, pcclComm_t comm, pcclRequest_t* req) {
  return async(comm, kNoType, kNoOp, opts, req, [&](pccl::Communicator& c, const pccl::capi::ReduceArgs& a) {
    return c.barrierAsync(a.options);
  });
}

}  // extern "C"
