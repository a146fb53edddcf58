#include "wire/message.hpp"

#include <fmt/format.h>

namespace pccl::wire {

const char* msgTypeName(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kHello: return "Hello";
    case MsgType::kHelloReply: return "HelloReply";
    case MsgType::kAuthProof: return "AuthProof";
    case MsgType::kAuthOk: return "AuthOk";
    case MsgType::kError: return "Error";
    case MsgType::kJoinRequest: return "JoinRequest";
    case MsgType::kJoinAccepted: return "JoinAccepted";
    case MsgType::kHeartbeat: return "Heartbeat";
    case MsgType::kVoteUpdate: return "VoteUpdate";
    case MsgType::kWithdrawVote: return "WithdrawVote";
    case MsgType::kTopologyUpdate: return "TopologyUpdate";
    case MsgType::kP2PReady: return "P2PReady";
    case MsgType::kTopologyReady: return "TopologyReady";
    case MsgType::kTopologyFailed: return "TopologyFailed";
    case MsgType::kMembershipStatus: return "MembershipStatus";
    case MsgType::kPeerLeft: return "PeerLeft";
    case MsgType::kLeave: return "Leave";
    case MsgType::kP2PFailed: return "P2PFailed";
    case MsgType::kQueryStatus: return "QueryStatus";
    case MsgType::kVoteOptimize: return "VoteOptimize";
    case MsgType::kRunResumed: return "RunResumed";
    case MsgType::kProbePlan: return "ProbePlan";
    case MsgType::kProbeReport: return "ProbeReport";
    case MsgType::kLinkQuery: return "LinkQuery";
    case MsgType::kLinkReport: return "LinkReport";
    case MsgType::kOpAnnounce: return "OpAnnounce";
    case MsgType::kSyncAnnounce: return "SyncAnnounce";
    case MsgType::kSyncPlan: return "SyncPlan";
    case MsgType::kSyncDone: return "SyncDone";
    case MsgType::kSyncComplete: return "SyncComplete";
    case MsgType::kOpAbort: return "OpAbort";
    case MsgType::kOpDone: return "OpDone";
    case MsgType::kOpState: return "OpState";
    case MsgType::kOpQuery: return "OpQuery";
    case MsgType::kOpOutcome: return "OpOutcome";
    case MsgType::kOpFailed: return "OpFailed";
    case MsgType::kData: return "Data";
    case MsgType::kP2PHello: return "P2PHello";
    case MsgType::kP2PAccept: return "P2PAccept";
    case MsgType::kRelayHello: return "RelayHello";
    case MsgType::kRelayReady: return "RelayReady";
  }
  return "Unknown";
}

std::string shortId(const Uuid& id) {
  return fmt::format("{:02x}{:02x}{:02x}{:02x}", id[0], id[1], id[2], id[3]);
}

}  // namespace pccl::wire
