// Membership messages between a peer and the master on its control connection (docs/protocol.md §5.2):
// joining, heartbeats, votes, ring builds, status queries, departures.
#ifndef PCCL_WIRE_CONTROL_MESSAGES_HPP_
#define PCCL_WIRE_CONTROL_MESSAGES_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "wire/message.hpp"

namespace pccl::wire {

struct JoinRequest {
  static constexpr MsgType kType = MsgType::kJoinRequest;
  uint16_t p2p_port = 0;
  std::string advertise_host;  // empty: the master uses the address it sees
  uint32_t group = 0;
  uint32_t connections = 0;    // K this peer opens to its successor
  uint32_t host_connections = 0;  // K to a successor on the same host (sameHost below)
  SignKey ring_key{};          // the key this peer signs its ring hellos with (net/identity.hpp)
  std::string client_version;
  // A peer coming back to a master (restarted, or another address of the run) after it lost its own:
  // what it holds of the run, so the master can take it back (docs/protocol.md §8.8).
  static constexpr uint8_t kResuming = 1;  // resume_flags: the fields below are set
  static constexpr uint8_t kRingUp = 2;    // its ring of `epoch` is installed and usable
  // A newcomer that every master it knows refused as a standby: a standby takes it and starts the run.
  static constexpr uint8_t kAnyMaster = 4;
  // This peer looks for a master again when it loses its connection (master_reconnect_ms > 0): a master
  // whose connection to it breaks holds its place for a while (protocol 17, docs/protocol.md §8.4).
  static constexpr uint8_t kReconnects = 8;
  uint8_t resume_flags = 0;
  Uuid run_id{};
  uint64_t term = 0;
  Uuid peer_id{};              // the id the run gave it
  uint64_t epoch = 0;          // its last installed ring's epoch (0: none)
  std::vector<Uuid> ring;      // that ring's members, in ring order (all groups)
  // Resuming (protocol 10): `ring_key`'s signature over the control connection's session id and the
  // resume record (net::resumeProof), so that only the holder of the member's ring key can take its
  // place. Only on the wire when kResuming is set.
  Signature resume_sig{};
  // Regions (protocol 11, docs/protocol.md §5.2.2): the region this peer declares (empty: none; the
  // master detects one from the measured links), and, when resuming, its region in the ring of `epoch`
  // (so that the master taking the run back holds the regions the members hold).
  std::string region;
  std::string ring_region;
  // How it asks its group's all-reduces to run (protocol 12): Levels below. The master decides for the
  // whole group (MemberInfo::levels).
  uint8_t levels = 0;
  // Whether it accepts inbound connections on its ring port (protocol 20, issue 37): 0 when it declared
  // inbound = false (behind a firewall or NAT; the master does not dial it back), else 1.
  uint8_t inbound = 1;
  bool resuming() const { return (resume_flags & kResuming) != 0; }
  void encode(ByteWriter& w) const;
  static Result<JoinRequest> decode(ByteReader& r);
};
inline constexpr uint32_t kMaxResumeRing = 65536;

struct JoinAccepted {
  static constexpr MsgType kType = MsgType::kJoinAccepted;
  Uuid peer_id{};
  uint32_t heartbeat_interval_ms = 0;  // the master's expectations, so the peer pings often enough
  uint32_t peer_timeout_ms = 0;
  // The run this master leads (docs/protocol.md §8.8): a peer refuses a master of another run, or of an
  // older term than the one it knows.
  Uuid run_id{};
  uint64_t term = 0;
  uint64_t epoch = 0;    // the master's current epoch
  uint8_t resumed = 0;   // 1: the peer was taken back as the member it was (its JoinRequest's peer_id)
  void encode(ByteWriter& w) const;
  static Result<JoinAccepted> decode(ByteReader& r);
};

// Master -> every member it took back: the run goes on (docs/protocol.md §8.8). Sent when the members of
// the last ring have all come back, or when the master's rebuild window closed. `stale` 1: a member did
// not come back (or the ring was being rebuilt): every member must call pcclUpdateTopology; `detail` says why.
struct RunResumed {
  static constexpr MsgType kType = MsgType::kRunResumed;
  uint64_t epoch = 0;
  uint64_t term = 0;
  uint8_t stale = 0;
  std::string detail;
  void encode(ByteWriter& w) const;
  static Result<RunResumed> decode(ByteReader& r);
};

using Heartbeat = Empty<MsgType::kHeartbeat>;
using VoteUpdate = Empty<MsgType::kVoteUpdate>;
// A vote for a measured ring (pcclOptimizeTopology): like VoteUpdate, but the master measures the links
// (§5.7) and orders the ring by them. Every accepted peer must cast the same kind of vote.
using VoteOptimize = Empty<MsgType::kVoteOptimize>;
using WithdrawVote = Empty<MsgType::kWithdrawVote>;
using Leave = Empty<MsgType::kLeave>;

struct MemberInfo {
  Uuid id{};
  std::string host;
  uint16_t port = 0;
  uint32_t group = 0;
  uint32_t connections = 0;
  uint32_t host_connections = 0;
  SignKey ring_key{};  // from its JoinRequest: its ring hellos must verify with it
  // Its effective region in this ring (protocol 11): what it declared, else what the master detected
  // ("auto-0", ...), else "" (the unnamed region). The master's JoinRequest bookkeeping holds the
  // declared one here until a build decides (master/regions.hpp).
  std::string region;
  // How its group's all-reduces run (protocol 12, docs/algorithms.md §12): in a TopologyUpdate the
  // master's decision for the group, kFlat or kTwoLevel, the same for every member of a group; in the
  // master's JoinRequest bookkeeping what the member asked for (kAuto too).
  uint8_t levels = 0;
  // In a TopologyUpdate, for a two-level group (protocol 14): the smallest call, in bytes of the
  // caller's buffer, that runs in two levels; smaller ones run on the flat ring (the two-level gather
  // keeps its own rule). 0: every size. The master's cost model sets it (master/levels.hpp).
  uint64_t two_level_bytes = 0;
  // Whether its ring port accepts connections from other peers (protocol 20, docs/concepts.md
  // "Reachability"): 1 when it did not declare inbound = false and the master's dial-back of that port
  // authenticated; 0 otherwise. A link to a member with 0 is opened by the member (opensLink below).
  uint8_t inbound = 1;
  // The member that relays the ring link from this member to its group successor (protocol 20): set
  // when the two cannot dial each other (linkable() false); zeros: a direct link.
  Uuid relay{};
  bool hasRelay() const { return relay != Uuid{}; }
  bool operator==(const MemberInfo& o) const {
    return id == o.id && host == o.host && port == o.port && group == o.group && connections == o.connections &&
           host_connections == o.host_connections && ring_key == o.ring_key && region == o.region &&
           levels == o.levels && two_level_bytes == o.two_level_bytes && inbound == o.inbound &&
           relay == o.relay;
  }
};

// The levels of a group's all-reduce (JoinRequest::levels, MemberInfo::levels).
enum class Levels : uint8_t {
  kAuto = 0,      // asked: whatever the master's cost model picks
  kFlat = 1,      // one ring over the whole group
  kTwoLevel = 2,  // inside each region, then across regions (docs/algorithms.md §12)
};
inline constexpr uint8_t kMaxLevels = static_cast<uint8_t>(Levels::kTwoLevel);

// A region name (declared or effective): at most kMaxRegion bytes of [A-Za-z0-9._-]; empty is the
// unnamed region. Decoders refuse anything else (ProtocolError); a communicator refuses it at create.
inline constexpr size_t kMaxRegion = 64;
bool isValidRegion(const std::string& region);
// The master names the regions it detects "auto-0", "auto-1", ...; a communicator cannot declare one.
inline constexpr const char* kAutoRegionPrefix = "auto-";

// True when two advertised hosts are the same machine: equal strings, or both loopback addresses
// (127.0.0.0/8, ::1, "localhost"). Symmetric, so both ends of a link decide alike.
bool sameHost(const std::string& a, const std::string& b);
// The connections `from` opens to `to` for a ring link (or a probe of it): its K, or its same-host K
// when both are on one host (one flow is not limited there, and every extra one costs CPU).
uint32_t linkConnections(const MemberInfo& from, const MemberInfo& to);
// Who opens the connections of a link that carries data from `from` to `to` (a ring link, a probe, a
// shared-state transfer): `from`, as always, unless `to` cannot be dialled (inbound 0) and `from` can,
// on different hosts; then `to` dials `from` and says so in its hellos (kHelloReverse). Both ends
// decide alike from the same ring. Two members that both cannot be dialled have no direct link.
bool opensLink(const MemberInfo& from, const MemberInfo& to);
// Whether `a` and `b` can have a direct link: one of them can be dialled, or they share a host.
bool linkable(const MemberInfo& a, const MemberInfo& b);

// A member's encoding (docs/protocol.md §5.2), shared by TopologyUpdate and the probe plans (§5.7):
// id(16) + host length(2) + host + port(2) + group(4) + connections(4) + host_connections(4) + ring_key(32)
// + region length(2) + region + levels(1) + two_level_bytes(8) + inbound(1) + relay(16).
inline constexpr size_t kMinMemberBytes = 92;
void encodeMember(ByteWriter& w, const MemberInfo& m);
Status decodeMember(ByteReader& r, MemberInfo* m);

struct TopologyUpdate {
  static constexpr MsgType kType = MsgType::kTopologyUpdate;
  uint64_t epoch = 0;
  std::vector<MemberInfo> ring;  // global ring order
  void encode(ByteWriter& w) const;
  static Result<TopologyUpdate> decode(ByteReader& r);
};

// One epoch number: P2PReady (peer: my ring connections are up), TopologyReady (master: everyone's are).
template <MsgType T>
struct EpochMsg {
  static constexpr MsgType kType = T;
  uint64_t epoch = 0;
  void encode(ByteWriter& w) const { w.u64(epoch); }
  static Result<EpochMsg> decode(ByteReader& r) {
    EpochMsg m;
    PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
    return m;
  }
};
using P2PReady = EpochMsg<MsgType::kP2PReady>;
using TopologyReady = EpochMsg<MsgType::kTopologyReady>;

// A ring build that failed: TopologyFailed (master -> peers), P2PFailed (peer -> master).
template <MsgType T>
struct EpochFailure {
  static constexpr MsgType kType = T;
  uint64_t epoch = 0;
  uint16_t code = 0;  // pccl::Code
  std::string reason;
  void encode(ByteWriter& w) const {
    w.u64(epoch);
    w.u16(code);
    w.str(reason);
  }
  static Result<EpochFailure> decode(ByteReader& r) {
    EpochFailure m;
    PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
    PCCL_RETURN_IF_ERROR(r.u16(&m.code));
    PCCL_RETURN_IF_ERROR(r.str(&m.reason));
    return m;
  }
};
using TopologyFailed = EpochFailure<MsgType::kTopologyFailed>;
using P2PFailed = EpochFailure<MsgType::kP2PFailed>;

// Peer asks the master whether a topology update would change anything; answered by MembershipStatus.
struct QueryStatus {
  static constexpr MsgType kType = MsgType::kQueryStatus;
  uint64_t request_id = 0;
  void encode(ByteWriter& w) const { w.u64(request_id); }
  static Result<QueryStatus> decode(ByteReader& r) {
    QueryStatus m;
    PCCL_RETURN_IF_ERROR(r.u64(&m.request_id));
    return m;
  }
};

struct MembershipStatus {
  static constexpr MsgType kType = MsgType::kMembershipStatus;
  uint64_t request_id = 0;  // the QueryStatus this answers
  uint32_t accepted = 0;
  uint32_t pending = 0;
  uint8_t vote_open = 0;  // some peer is waiting in updateTopology
  uint8_t stale = 0;      // a member left since the last ring was built
  void encode(ByteWriter& w) const;
  static Result<MembershipStatus> decode(ByteReader& r);
};

enum class LeaveReason : uint8_t { kGraceful = 0, kTimeout = 1, kConnectionLost = 2, kProtocolError = 3 };

struct PeerLeft {
  static constexpr MsgType kType = MsgType::kPeerLeft;
  Uuid peer_id{};
  uint8_t reason = 0;  // LeaveReason
  std::string detail;
  void encode(ByteWriter& w) const;
  static Result<PeerLeft> decode(ByteReader& r);
};

}  // namespace pccl::wire

#endif  // PCCL_WIRE_CONTROL_MESSAGES_HPP_
