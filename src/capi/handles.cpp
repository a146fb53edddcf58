#include "capi/handles.hpp"

#include <atomic>
#include <limits>

namespace pccl::capi {
namespace {

constexpr unsigned kKindBits = 2;
constexpr uintptr_t kKindMask = (uintptr_t{1} << kKindBits) - 1;

const char* kindName(uintptr_t kind) {
  switch (kind) {
    case static_cast<uintptr_t>(HandleKind::kComm): return "communicator";
    case static_cast<uintptr_t>(HandleKind::kMaster): return "master";
    case static_cast<uintptr_t>(HandleKind::kRequest): return "request";
  }
  return "unknown";
}

}  // namespace

uintptr_t reserveHandle(HandleKind kind) {
  static std::atomic<uint64_t> next_serial{1};
  const uint64_t serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  if (serial > (std::numeric_limits<uintptr_t>::max() >> kKindBits)) return 0;  // never reused, so none left
  return (static_cast<uintptr_t>(serial) << kKindBits) | static_cast<uintptr_t>(kind);
}

std::string badHandle(uintptr_t value, HandleKind kind) {
  std::string text = std::string("invalid ") + kindName(static_cast<uintptr_t>(kind)) + " handle";
  const uintptr_t got = value & kKindMask;
  if (value == 0) return text + " (NULL)";
  if (got != static_cast<uintptr_t>(kind) && got != 0) return text + " (a " + kindName(got) + " handle)";
  return text + " (never created, or already freed)";
}

// The tables live until the process ends and are never destroyed: handles the program did not free
// stay valid (and their objects untouched) while other static objects are torn down at exit.
HandleTable<CommEntry>& comms() {
  static auto* table = new HandleTable<CommEntry>;
  return *table;
}
HandleTable<MasterEntry>& masters() {
  static auto* table = new HandleTable<MasterEntry>;
  return *table;
}
HandleTable<RequestEntry>& requests() {
  static auto* table = new HandleTable<RequestEntry>;
  return *table;
}

}  // namespace pccl::capi
