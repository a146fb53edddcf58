// Shared-state sync messages between peers and the master (design.md §6; layouts in
// docs/protocol.md §6). A sync is a collective of the group, like an all-reduce:
//
//   peer ──SyncAnnounce (revision, strategy, per key: name, dtype, count, digest)──► master
//   master, once every member announced: elects the content ──SyncPlan──► each peer
//       (its error, or the keys it must fetch and which peers hold them)
//   peer fetches from those peers, verifies the digests ──SyncDone──► master
//   master, once every peer is done (or one failed) ──SyncComplete──► every peer
#ifndef PCCL_WIRE_SYNC_MESSAGES_HPP_
#define PCCL_WIRE_SYNC_MESSAGES_HPP_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "wire/message.hpp"

namespace pccl::wire {

inline constexpr uint32_t kMaxSyncKeys = 16384;     // per peer and sync
inline constexpr size_t kMaxSyncKeyName = 256;      // bytes of a key's name
inline constexpr uint32_t kMaxSyncSources = 4096;   // peers named as sources of one key (decoding limit)
// The master names at most this many sources per fetch (a fetcher uses about K connections in all),
// rotating the choice per receiver, so that a plan stays small and receivers spread over the holders.
inline constexpr uint32_t kMaxSyncFetchSources = 16;

enum class SyncStrategy : uint8_t { kEnforcePopular = 0, kReceiveOnly = 1, kSendOnly = 2 };
inline bool isValidSyncStrategy(uint8_t v) { return v <= 2; }

using Digest32 = std::array<uint8_t, 32>;

struct SyncKey {
  std::string name;
  uint8_t dtype = 0;
  uint64_t count = 0;  // elements
  Digest32 digest{};   // codec::hashBuffer of the bytes
  bool operator==(const SyncKey& o) const {
    return name == o.name && dtype == o.dtype && count == o.count && digest == o.digest;
  }
};

struct SyncAnnounce {
  static constexpr MsgType kType = MsgType::kSyncAnnounce;
  uint64_t epoch = 0;
  uint64_t revision = 0;
  uint8_t strategy = 0;  // SyncStrategy
  std::vector<SyncKey> keys;
  void encode(ByteWriter& w) const;
  static Result<SyncAnnounce> decode(ByteReader& r);
};

struct SyncFetch {
  uint32_t key = 0;            // index into this peer's own SyncAnnounce.keys
  Digest32 digest{};           // the elected content's digest: what the fetched bytes must hash to
  std::vector<Uuid> sources;   // peers holding the elected bytes (never the receiver itself)
  bool operator==(const SyncFetch& o) const { return key == o.key && digest == o.digest && sources == o.sources; }
};

struct SyncPlan {
  static constexpr MsgType kType = MsgType::kSyncPlan;
  uint64_t sync_id = 0;
  uint16_t code = 0;   // 0, or why this peer cannot take part (e.g. Mismatch)
  std::string reason;
  uint64_t revision = 0;  // the elected revision: the peer's revision once the sync completes
  std::vector<SyncFetch> fetches;
  void encode(ByteWriter& w) const;
  static Result<SyncPlan> decode(ByteReader& r);
};

// SyncDone (peer -> master: my fetches are verified, or why they failed) and SyncComplete
// (master -> peers: the sync is over, code 0 when every peer succeeded).
template <MsgType T>
struct SyncOutcome {
  static constexpr MsgType kType = T;
  uint64_t sync_id = 0;
  uint16_t code = 0;
  std::string reason;
  void encode(ByteWriter& w) const {
    w.u64(sync_id);
    w.u16(code);
    w.str(reason);
  }
  static Result<SyncOutcome> decode(ByteReader& r) {
    SyncOutcome m;
    PCCL_RETURN_IF_ERROR(r.u64(&m.sync_id));
    PCCL_RETURN_IF_ERROR(r.u16(&m.code));
    PCCL_RETURN_IF_ERROR(r.str(&m.reason));
    return m;
  }
};
using SyncDone = SyncOutcome<MsgType::kSyncDone>;
using SyncComplete = SyncOutcome<MsgType::kSyncComplete>;

}  // namespace pccl::wire

#endif  // PCCL_WIRE_SYNC_MESSAGES_HPP_
