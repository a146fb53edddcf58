// The ring's data frames: the 20-byte frame header (type kData) followed by a 45-byte DataHeader and
// the payload. The receiver learns where the payload goes from the DataHeader alone, so it can read it
// straight into its destination (docs/protocol.md §5.4).
//   op_id u64 | phase u32 | flags u32 | offset u64 | seq u32 | OpDesc (22 bytes)
// On ring connections op_id is the operation's tag and seq its call number (together with the frame's
// epoch they name the operation), and every frame carries the operation's descriptor, so a neighbour
// refuses the data of a call that differs from its own before combining anything. A frame with
// kDataControl carries a RingCtl (hello, prepared, commit, abort) instead of elements, in either
// direction. State-fetch connections (§5.6) use op_id for the sync id and leave seq and the descriptor 0.
#ifndef PCCL_WIRE_DATA_HPP_
#define PCCL_WIRE_DATA_HPP_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pccl/status.hpp"
#include "wire/frame.hpp"

namespace pccl::wire {

inline constexpr size_t kDataHeaderSize = 50;
inline constexpr uint32_t kMaxDataPayload = 64u << 20;  // one segment's bytes, checked before reading them
// Payload bytes of one operation a peer may send its successor before the successor's hello for it
// arrived (the successor keeps them until it makes the call). A gather all-reduce is chosen only when
// everything a peer can receive of it fits (world - 1 inputs), so it never waits for a hello.
inline constexpr uint32_t kEagerBytes = 4u << 20;

// How an all-reduce moves its data (part of the descriptor: every peer must choose the same).
enum class Algo : uint8_t {
  kRing = 0,    // reduce-scatter + all-gather around the ring (bandwidth-optimal)
  kGather = 1,  // every input travels half the ring each way, every peer reduces all (2 hops fewer)
  kTwoLevel = 2,  // inside each region, then across regions, then inside again (docs/algorithms.md §12)
  kTwoLevelGather = 3,  // a small call: gather in each region, between the regions' leaders, broadcast (§12a)
};
inline bool isTwoLevel(uint8_t algo) {
  return algo == static_cast<uint8_t>(Algo::kTwoLevel) || algo == static_cast<uint8_t>(Algo::kTwoLevelGather);
}

inline constexpr uint32_t kDataCompressed = 1;  // flags: the payload is one zstd frame
// flags: a request for shared-state bytes (state-fetch connections only, docs/protocol.md §5.6)
inline constexpr uint32_t kDataRequest = 2;
inline constexpr uint32_t kDataControl = 4;  // flags: the payload is a RingCtl (ring connections only)
// Same-host lending (docs/protocol.md §5.4.1): frames a DataChannel consumes itself, never shown to the
// ring. At most one of these (or of the resume flags below) is set; kDataLent may come with kDataCompressed.
inline constexpr uint32_t kDataLendOffer = 8;    // payload: LendOffer ("read my memory, prove it on the token")
inline constexpr uint32_t kDataLendAccept = 16;  // no payload: "I read your token: lend me payloads"
inline constexpr uint32_t kDataLent = 32;        // payload: LendRecord (where the elements are) instead of them
// payload: LendRegion: lent records of the frame's (op_id, seq) may name bytes inside it (protocol 10)
inline constexpr uint32_t kDataLendRegion = 64;
inline constexpr uint32_t kDataLendRetire = 128;  // no payload: the frame's (op_id, seq) lends nothing more
// Resumable connections (docs/protocol.md §5.4.3, protocol 17): frames a DataChannel consumes itself,
// not numbered. Payload: a u64.
inline constexpr uint32_t kDataAck = 256;      // "I have taken in every frame up to number N"
inline constexpr uint32_t kDataNextSeq = 512;  // "the next frame I send is number N" (after a gap)
inline constexpr size_t kResumeValueSize = 8;
inline constexpr uint32_t kDataLinkFlags =
    kDataLendOffer | kDataLendAccept | kDataLent | kDataLendRegion | kDataLendRetire | kDataAck | kDataNextSeq;
inline constexpr uint32_t kDataKnownFlags = kDataCompressed | kDataRequest | kDataControl | kDataLinkFlags;

// Which collective a call is (part of the descriptor since protocol 8). Every kind runs on the ring's
// phases (docs/algorithms.md §1): an all-reduce all of them, a reduce-scatter the first half, an
// all-gather the second half, a broadcast the second half with the root's block alone, a barrier none.
enum class Collective : uint8_t {
  kAllReduce = 0,
  kBroadcast = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kBarrier = 4,
};
inline constexpr uint8_t kMaxCollective = static_cast<uint8_t>(Collective::kBarrier);
const char* collectiveName(Collective c);

// What every peer of a collective must agree on besides the tag (the epoch is the frame's). `count` is
// the elements of the whole ring layout: an all-gather's output, a reduce-scatter's input.
struct OpDesc {
  uint64_t count = 0;
  uint32_t segment_bytes = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t quant = 0;
  uint8_t compress = 0;
  uint8_t algo = 0;  // Algo
  uint8_t kind = 0;  // Collective
  uint32_t root = 0; // broadcast: the root's rank in the group's ring; 0 otherwise
  bool operator==(const OpDesc& o) const {
    return count == o.count && segment_bytes == o.segment_bytes && dtype == o.dtype && op == o.op &&
           quant == o.quant && compress == o.compress && algo == o.algo && kind == o.kind && root == o.root;
  }
  bool operator!=(const OpDesc& o) const { return !(*this == o); }
};

struct DataHeader {
  uint64_t op_id = 0;  // ring: the tag
  uint32_t phase = 0;  // ring: step 0..N-2 reduce-scatter, N-1..2N-3 all-gather; gather: the input's rank;
                       // two-level: part << 16 | the part's ring step
  uint32_t flags = 0;  // kData* bits; others must be 0
  uint64_t offset = 0;
  uint32_t seq = 0;    // ring: the call's number for this tag in this epoch
  OpDesc desc;
};
inline DataHeader dataHeader(uint64_t op_id, uint32_t phase, uint32_t flags, uint64_t offset) {
  DataHeader h;
  h.op_id = op_id;
  h.phase = phase;
  h.flags = flags;
  h.offset = offset;
  return h;
}

// The payload of a kDataControl frame.
struct RingCtl {
  enum Kind : uint8_t {
    kHello = 1,     // receiver -> sender: "I called it, with `desc`"; lifts the eager limit
    kPrepared = 2,  // "the `value` consecutive peers ending with me (walking away from you) hold all their data"
    kCommit = 3,    // "every peer holds all its data": the operation succeeded
    kAbort = 4,     // the operation fails everywhere with code and reason (nobody can have committed)
  };
  uint8_t kind = 0;
  uint32_t value = 0;
  uint16_t code = 0;
  OpDesc desc;
  std::string reason;
};
inline constexpr size_t kMaxRingCtlReason = 2048;

// A kDataLendOffer's payload: the sender's process id (as its own kernel names it), the address of a
// 16-byte token, and the random nonce the token was derived from (with the connection's session id and
// the sender's role, net/lending.hpp); the receiver derives the token too and reads it there.
struct LendOffer {
  uint32_t pid = 0;
  uint64_t token_addr = 0;
  std::array<uint8_t, 16> nonce{};
};
inline constexpr size_t kLendOfferSize = 28;
// A kDataLent frame's payload: `bytes` of payload lie at `addr` in the lender's memory, unchanged until
// the operation they belong to ends there.
struct LendRecord {
  uint64_t addr = 0;
  uint32_t bytes = 0;
};
inline constexpr size_t kLendRecordSize = 12;
// A kDataLendRegion's payload: one buffer of the operation (op_id, seq) in the lender's memory; the
// receiver reads a lent record of that operation only inside a region announced for it, and forgets
// them at the operation's kDataLendRetire.
struct LendRegion {
  uint64_t addr = 0;
  uint64_t bytes = 0;
  bool contains(uint64_t a, uint64_t n) const { return bytes > 0 && a >= addr && n <= bytes && a - addr <= bytes - n; }
};
inline constexpr size_t kLendRegionSize = 16;

using DataHeaderBytes = std::array<uint8_t, kDataHeaderSize>;
// Frame header + data header for `payload_bytes` of elements.
std::array<uint8_t, kHeaderSize + kDataHeaderSize> encodeDataFrameHead(const DataHeader& d, uint64_t epoch,
                                                                       uint32_t payload_bytes);
Result<DataHeader> decodeDataHeader(const uint8_t* data, size_t size);

std::array<uint8_t, kLendOfferSize> encodeLendOffer(const LendOffer& o);
Result<LendOffer> decodeLendOffer(const uint8_t* data, size_t size);
std::array<uint8_t, kLendRecordSize> encodeLendRecord(const LendRecord& r);
Result<LendRecord> decodeLendRecord(const uint8_t* data, size_t size);
std::array<uint8_t, kLendRegionSize> encodeLendRegion(const LendRegion& r);
Result<LendRegion> decodeLendRegion(const uint8_t* data, size_t size);

std::vector<uint8_t> encodeRingCtl(const RingCtl& c);
Result<RingCtl> decodeRingCtl(const uint8_t* data, size_t size);

}  // namespace pccl::wire

#endif  // PCCL_WIRE_DATA_HPP_
