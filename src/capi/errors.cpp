// pcclGetErrorString, pcclGetLastError, and the per-thread failure details behind them.
#include "capi/errors.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "capi/handles.hpp"

namespace pccl::capi {
namespace {

// The calling thread's failures: the last one of any call, and the last one per communicator.
struct ThreadErrors {
  std::string last;
  std::vector<std::pair<uintptr_t, std::string>> by_comm;  // few entries: one per communicator used
  std::string returned;  // backing store of pcclGetLastError's result
};

thread_local ThreadErrors t_errors;

// Entries of destroyed communicators are dropped once a thread has this many (their handles are
// never reused, so until then they are only unreachable).
constexpr size_t kPruneAt = 16;

void pruneDestroyed(std::vector<std::pair<uintptr_t, std::string>>& by_comm) {
  by_comm.erase(std::remove_if(by_comm.begin(), by_comm.end(),
                               [](const auto& e) { return !comms().contains(e.first); }),
                by_comm.end());
}

}  // namespace

pcclResult_t fail(pcclResult_t code, std::string message) {
  t_errors.last = std::move(message);
  return code;
}

pcclResult_t fromStatus(const pccl::Status& s) {
  if (s.isOk()) return pcclSuccess;
  return fail(toC(s.code()), s.message());
}

void rememberFailureOn(uintptr_t comm) {
  auto& by_comm = t_errors.by_comm;
  for (auto& e : by_comm) {
    if (e.first == comm) {
      e.second = t_errors.last;
      return;
    }
  }
  if (by_comm.size() >= kPruneAt) pruneDestroyed(by_comm);
  by_comm.emplace_back(comm, t_errors.last);
}

const char* lastErrorFor(uintptr_t comm) {
  ThreadErrors& t = t_errors;
  if (comm == 0 || !comms().contains(comm)) {
    t.returned = t.last;
    return t.returned.c_str();
  }
  t.returned.clear();
  for (const auto& e : t.by_comm) {
    if (e.first == comm) t.returned = e.second;
  }
  return t.returned.c_str();
}

}  // namespace pccl::capi

extern "C" {

const char* pcclGetErrorString(pcclResult_t result) {
  // Read as an int: a C caller may pass any value, and C++ may not load one outside the enum's
  // range as the enum (undefined behaviour that UBSan reports).
  static_assert(sizeof(pcclResult_t) == sizeof(int), "pcclResult_t is int-sized");
  int code = 0;
  std::memcpy(&code, &result, sizeof code);
  switch (code) {
    case pcclSuccess: return "success";
    case pcclInvalidArgument: return "invalid argument";
    case pcclInvalidUsage: return "invalid usage";
    case pcclMasterUnreachable: return "master unreachable";
    case pcclAuthFailed: return "authentication failed";
    case pcclVersionMismatch: return "protocol version mismatch";
    case pcclPeerLost: return "peer lost";
    case pcclTooFewPeers: return "too few peers";
    case pcclTimeout: return "timeout";
    case pcclMismatch: return "collective mismatch between peers";
    case pcclKicked: return "kicked by the master";
    case pcclUnsupported: return "unsupported";
    case pcclSystemError: return "system error";
    case pcclInternalError: return "internal error";
    case pcclProtocolError: return "protocol error";
    case pcclTopologyChanged: return "topology changed";
  }
  return "unknown pcclResult_t value";
}

const char* pcclGetLastError(pcclComm_t comm) {
  try {
    return pccl::capi::lastErrorFor(pccl::capi::valueOf(comm));
  } catch (...) {
    return "";
  }
}

}  // extern "C"
