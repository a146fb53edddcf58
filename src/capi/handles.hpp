// The C API's handles (pcclComm_t, pcclMaster_t, pcclRequest_t) and the tables of live objects
// behind them.
//
// A handle is not an address: it is a serial number (serial << 2 | kind) from one process-wide
// counter that never repeats, so a destroyed handle can never name a newer object, and a garbage
// value is looked up, never dereferenced. The tables hand out shared_ptrs: the call that frees a
// handle (pcclCommDestroy, pcclMasterDestroy, pcclWait) removes it from its table, so every later
// call gets pcclInvalidArgument, while calls already holding the object finish with it; the last of
// them frees it.
#ifndef PCCL_CAPI_HANDLES_HPP_
#define PCCL_CAPI_HANDLES_HPP_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "pccl/communicator.hpp"
#include "pccl/master.hpp"
#include "pccl/pccl.h"

namespace pccl::capi {

enum class HandleKind : uintptr_t { kComm = 1, kMaster = 2, kRequest = 3 };

// A fresh handle value of `kind`, never handed out before; 0 when the values are exhausted (not
// before 2^62 handles on a 64-bit system). Any thread.
uintptr_t reserveHandle(HandleKind kind);

// Why `value` is not a live handle of `kind`, for pcclGetLastError ("invalid communicator handle
// (a request handle)", "... (NULL)", "... (never created, or already destroyed)").
std::string badHandle(uintptr_t value, HandleKind kind);

template <typename P>
uintptr_t valueOf(P* handle) {
  return reinterpret_cast<uintptr_t>(handle);
}
template <typename P>
P* handleOf(uintptr_t value) {
  return reinterpret_cast<P*>(value);
}

// The live objects of one kind, by handle value. Thread-safety: any thread; the lock is held only
// to look up, insert or erase, never while an object is used.
template <typename T>
class HandleTable {
 public:
  void insert(uintptr_t value, std::shared_ptr<T> object) {
    std::lock_guard<std::mutex> lk(mu_);
    live_.emplace(value, std::move(object));
  }
  // The object, kept alive for as long as the caller holds the pointer; null when not live.
  std::shared_ptr<T> find(uintptr_t value) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(value);
    return it == live_.end() ? nullptr : it->second;
  }
  // Takes the object out: the handle is invalid from now on. Null when it was not live (never
  // created, or removed already: exactly one of two racing removes gets the object).
  std::shared_ptr<T> remove(uintptr_t value) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(value);
    if (it == live_.end()) return nullptr;
    std::shared_ptr<T> object = std::move(it->second);
    live_.erase(it);
    return object;
  }
  bool contains(uintptr_t value) const {
    std::lock_guard<std::mutex> lk(mu_);
    return live_.count(value) != 0;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<uintptr_t, std::shared_ptr<T>> live_;
};

struct CommEntry {
  std::unique_ptr<pccl::Communicator> impl;
  uint32_t peer_group = 0;
};

struct MasterEntry {
  std::unique_ptr<pccl::Master> impl;
};

struct RequestEntry {
  pccl::ReduceHandle op;
  uintptr_t comm = 0;  // the communicator's handle: whose failure detail a failed wait sets
  uint64_t tag = 0;
};

HandleTable<CommEntry>& comms();
HandleTable<MasterEntry>& masters();
HandleTable<RequestEntry>& requests();

}  // namespace pccl::capi

#endif  // PCCL_CAPI_HANDLES_HPP_
