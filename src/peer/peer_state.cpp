#include "peer/peer_state.hpp"

namespace pccl::peer {

const char* peerStateName(PeerState s) {
  switch (s) {
    case PeerState::kIdle: return "idle";
    case PeerState::kConnecting: return "connecting";
    case PeerState::kPending: return "pending";
    case PeerState::kBuildingRing: return "building-ring";
    case PeerState::kMember: return "member";
    case PeerState::kVoting: return "voting";
    case PeerState::kLeft: return "left";
    case PeerState::kFailed: return "failed";
  }
  return "?";
}

bool isLegalTransition(PeerState from, PeerState to) {
  using S = PeerState;
  if (from == S::kLeft || from == S::kFailed) return false;  // terminal
  if (to == S::kFailed) return from != S::kIdle;
  if (to == S::kLeft) return isJoined(from);
  switch (from) {
    case S::kIdle: return to == S::kConnecting;
    case S::kConnecting: return to == S::kPending || to == S::kIdle;
    case S::kPending: return to == S::kBuildingRing || to == S::kIdle;
    case S::kBuildingRing: return to == S::kMember || to == S::kIdle;
    // kMember -> kBuildingRing: our vote was withdrawn on a deadline just as the master started the update.
    case S::kMember: return to == S::kVoting || to == S::kBuildingRing;
    case S::kVoting: return to == S::kBuildingRing || to == S::kMember;
    default: return false;
  }
}

}  // namespace pccl::peer
