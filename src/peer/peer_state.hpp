// A peer's membership state machine, as its Communicator sees it (docs/architecture.md).
//
//   kIdle --connect()--> kConnecting --JoinAccepted--> kPending --TopologyUpdate--> kBuildingRing
//   kBuildingRing --TopologyReady / TopologyFailed--> kMember
//   kMember --updateTopology()--> kVoting --TopologyUpdate--> kBuildingRing
//   kVoting --deadline (vote withdrawn)--> kMember
//   kConnecting --failure--> kIdle          kPending/kBuildingRing --connect() deadline--> kIdle
//   any joined state --master lost / kicked--> kFailed   any joined --leave()--> kLeft
#ifndef PCCL_PEER_PEER_STATE_HPP_
#define PCCL_PEER_PEER_STATE_HPP_

#include <cstdint>

namespace pccl::peer {

enum class PeerState : uint8_t { kIdle, kConnecting, kPending, kBuildingRing, kMember, kVoting, kLeft, kFailed };

const char* peerStateName(PeerState s);
bool isLegalTransition(PeerState from, PeerState to);
inline bool isJoined(PeerState s) {
  return s == PeerState::kPending || s == PeerState::kBuildingRing || s == PeerState::kMember ||
         s == PeerState::kVoting;
}

}  // namespace pccl::peer

#endif  // PCCL_PEER_PEER_STATE_HPP_
