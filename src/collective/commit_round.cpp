#include "collective/commit_round.hpp"

#include <algorithm>

namespace pccl::collective {

CommitRound::Sends CommitRound::prepared() {
  prepared_ = true;
  return next();
}

CommitRound::Sends CommitRound::fromPredecessor(uint32_t streak) {
  behind_ = std::max(behind_, std::min(streak, world_ - 1));
  return next();
}

CommitRound::Sends CommitRound::fromSuccessor(uint32_t streak) {
  ahead_ = std::max(ahead_, std::min(streak, world_ - 1));
  return next();
}

CommitRound::Sends CommitRound::commitReceived() {
  Sends s;
  if (committed_) return s;
  // Only a peer that knew every peer prepared sends a commit, so we are prepared too.
  committed_ = true;
  prepared_ = true;
  s.commit = true;
  return s;
}

CommitRound::Sends CommitRound::next() {
  Sends s;
  if (!prepared_ || committed_) return s;
  if (behind_ + ahead_ + 1 >= world_) {
    committed_ = true;
    s.commit = true;
    return s;
  }
  // The successor hears about us and the peers behind us; the predecessor about us and those ahead.
  const uint32_t succ = std::min(behind_ + 1, world_ - 1);
  const uint32_t pred = std::min(ahead_ + 1, world_ - 1);
  if (succ > sent_succ_) s.to_successor = sent_succ_ = succ;
  if (pred > sent_pred_) s.to_predecessor = sent_pred_ = pred;
  return s;
}

}  // namespace pccl::collective
