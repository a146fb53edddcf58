// The shared-state sync's C API.
#include <fmt/format.h>

#include "capi/args.hpp"
#include "capi/calls.hpp"

using pccl::capi::CommEntry;
using pccl::capi::fail;

namespace {

// Checks the tensors of *state and converts it (their buffers stay the caller's, not copied).
pcclResult_t sharedStateFrom(const pcclSharedState_t& state, pccl::SharedState* out) {
  if (state.count > 0 && state.infos == nullptr) return fail(pcclInvalidArgument, "state->infos must not be NULL");
  out->revision = state.revision;
  out->compress = state.compress;
  for (size_t i = 0; i < state.count; ++i) {
    const pcclTensorInfo_t& t = state.infos[i];
    if (t.name == nullptr) return fail(pcclInvalidArgument, fmt::format("state->infos[{}].name is NULL", i));
    if (!pccl::capi::validEnum(t.dtype, 12)) {
      return fail(pcclInvalidArgument, fmt::format("state->infos[{}]: unknown pcclDataType_t value", i));
    }
    out->tensors.push_back(
        pccl::SharedTensor{t.name, static_cast<pccl::DataType>(pccl::capi::rawEnum(t.dtype)), t.count, t.data});
  }
  return pcclSuccess;
}

void syncInfoTo(const pccl::SyncInfo& in, pcclSyncInfo_t* out) {
  if (out == nullptr) return;
  out->tx_bytes = in.tx_bytes;
  out->rx_bytes = in.rx_bytes;
  out->keys_received = in.keys_received;
  out->revision = in.revision;
  out->time_s = in.seconds;
}

}  // namespace

extern "C" {

pcclResult_t pcclSyncSharedState(pcclComm_t comm, pcclSharedState_t* state, pcclSyncStrategy_t strategy,
                                 pcclSyncInfo_t* info) {
  return pccl::capi::onComm(comm, [&](CommEntry& c) -> pcclResult_t {
    PCCL_CHECK_PTR(state);
    if (state->struct_size != sizeof(pcclSharedState_t)) {
      return fail(pcclInvalidArgument, "pcclSharedState_t was not initialised with PCCL_SHARED_STATE_INIT");
    }
    if (!pccl::capi::validEnum(strategy, 3)) return fail(pcclInvalidArgument, "unknown pcclSyncStrategy_t value");
    pccl::SharedState s;
    const pcclResult_t r = sharedStateFrom(*state, &s);
    if (r != pcclSuccess) return r;
    auto result = c.impl->syncSharedState(s, static_cast<pccl::SyncStrategy>(pccl::capi::rawEnum(strategy)));
    if (!result.isOk()) return pccl::capi::fromStatus(result.status());
    state->revision = s.revision;
    syncInfoTo(*result, info);
    return pcclSuccess;
  });
}

}  // extern "C"
