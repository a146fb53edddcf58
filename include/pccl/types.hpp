// Element types, reduction operators and per-operation options of the C++ API. Numbered exactly as
// their C counterparts in pccl.h (pcclDataType_t, pcclRedOp_t, pcclQuant_t).
#ifndef PCCL_TYPES_HPP_
#define PCCL_TYPES_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pccl {

enum class DataType : uint8_t {
  kInt8 = 0, kUint8, kInt16, kUint16, kInt32, kUint32, kInt64, kUint64,
  kFloat16, kBfloat16, kFloat32, kFloat64,
};

enum class RedOp : uint8_t { kSum = 0, kAvg, kProd, kMin, kMax };

// Wire format of an all-reduce's payload (docs/algorithms.md §7): kNone sends the elements as they
// are; fp16/bf16/int8/fp4 quantize them on the wire (floating types only; fp4: e2m1 with a scale per 64
// elements, 4.5 bits an element).
enum class Quant : uint8_t { kNone = 0, kFp16, kBf16, kInt8, kFp4 };

// kDevice: send and recv are GPU memory; needs a GPU backend module (docs/gpu.md), else Unsupported.
enum class BufferLocation : uint8_t { kHost = 0, kDevice = 1 };

struct ReduceOptions {
  uint64_t tag = 0;       // concurrent operations need distinct tags; peers match operations by tag
  Quant quant = Quant::kNone;
  int compress = 0;       // zstd level 1..19 on the wire bytes (after quantization); 0 = off
  BufferLocation location = BufferLocation::kHost;
};

struct ReduceInfo {
  uint64_t tx_bytes = 0;    // payload bytes this peer sent on the ring
  uint64_t rx_bytes = 0;    // payload bytes it received
  uint32_t world_size = 0;  // peers that took part (the group's ring)
  double seconds = 0;       // wall time from the call to the result
  bool gathered = false;    // it took the gather path (small operations, docs/algorithms.md §1), else the ring
  bool hierarchical = false;  // it ran in two levels (regions, docs/algorithms.md §12)
};

// Shared state (docs/shared_state.md): named host buffers plus a revision, kept equal across the
// group by Communicator::syncSharedState.
struct SharedTensor {
  std::string name;  // unique within the state; 1..256 bytes
  DataType dtype = DataType::kFloat32;
  size_t count = 0;  // elements
  void* data = nullptr;  // host memory, count elements; overwritten when this peer is out of date
};

struct SharedState {
  uint64_t revision = 0;  // in: this peer's; out (on success): the elected revision
  std::vector<SharedTensor> tensors;
  int compress = 0;       // zstd level 1..19 asked of the sources for what this peer fetches; 0 = off
};

// kEnforcePopular: offer our content and take the elected one. kReceiveOnly: never a candidate; take
// the elected content. kSendOnly: offer our content and never take any (our buffers stay as they are).
enum class SyncStrategy : uint8_t { kEnforcePopular = 0, kReceiveOnly = 1, kSendOnly = 2 };

struct SyncInfo {
  uint64_t tx_bytes = 0;       // shared-state bytes this peer sent to others (on the wire)
  uint64_t rx_bytes = 0;       // bytes it received (on the wire); 0 when it was up to date
  uint32_t keys_received = 0;  // tensors whose content it replaced
  uint64_t revision = 0;       // the elected revision
  double seconds = 0;          // wall time from the call to the result
};

// Counters of one communicator since it was created (Communicator::stats(), pcclGetStats). The
// allreduce_* counters count every collective (all-reduces, broadcasts, all-gathers, reduce-scatters,
// barriers); they were named before the others existed.
struct CommStats {
  uint64_t allreduce_ops = 0;      // all-reduces that succeeded
  uint64_t allreduce_aborts = 0;   // all-reduces that started and then failed (to be retried)
  uint64_t allreduce_retries = 0;  // all-reduces started with the tag of one aborted last time it ran here
  uint64_t sync_ops = 0;           // shared-state syncs that succeeded
  uint64_t sync_aborts = 0;        // shared-state syncs that failed once started (not bad arguments or usage)
  uint64_t topology_updates = 0;   // rings installed (connect() and updateTopology() that succeeded)
  uint64_t tx_bytes = 0;           // all-reduce ring payload and shared-state bytes sent (on the wire)
  uint64_t rx_bytes = 0;           // the same, received
  uint64_t same_host_read_bytes = 0;  // ring payload bytes read straight from a same-host neighbour's memory
  uint64_t epoch = 0;              // epoch of the current ring
  double last_allreduce_seconds = 0;         // wall time of the last successful all-reduce
  double last_allreduce_bytes_per_second = 0;  // its data bytes (count x element size) / time
  uint64_t master_losses = 0;      // times this peer lost its master and looked for one (master_reconnect_ms)
  uint64_t master_returns = 0;     // times a master took it back and the run went on
  uint64_t master_away_ms = 0;     // total time without a master, over the returns
  // Ring connections that broke while both ends lived and were resumed on a new connection, without
  // failing an operation (docs/algorithms.md §6, "Network faults").
  uint64_t ring_reconnects = 0;
  uint64_t ring_resent_bytes = 0;  // bytes written again after those resumes (what the remote lacked)
  uint64_t ring_stalled_ms = 0;    // total time those connections were down before a new one took over
  // Connections to the ring successor that carry data now (all of them unless connections_per_peer is
  // 0, when the link chooses; docs/algorithms.md §13), and how often a link of this peer changed its count.
  uint64_t ring_active_connections = 0;
  uint64_t ring_connection_changes = 0;
  // Bytes this peer copied between the two ends of ring links it relays (members that cannot dial each
  // other, docs/concepts.md "Reachability"): its relaying's bandwidth cost, both directions.
  uint64_t relayed_bytes = 0;
};

}  // namespace pccl

#endif  // PCCL_TYPES_HPP_
