// The peers' commit round of one all-reduce (docs/algorithms.md §2), as pure logic: no I/O, no clock.
// A peer is *prepared* when all its data is in and its successor's hello matched its own call. Each
// prepared peer tells both neighbours how many consecutive peers, ending with itself and walking away
// from that neighbour, it knows to be prepared (a "streak"); a peer that knows streaks covering the
// whole ring (forward + backward + itself >= world) knows every peer is prepared: it commits and tells
// both neighbours, who commit and pass it on. With every peer prepared at once this takes
// ceil((world-1)/2) one-way delays. Thread: whoever owns it.
#ifndef PCCL_COLLECTIVE_COMMIT_ROUND_HPP_
#define PCCL_COLLECTIVE_COMMIT_ROUND_HPP_

#include <cstdint>

namespace pccl::collective {

class CommitRound {
 public:
  // What to send after an event: a streak of `to_successor` / `to_predecessor` peers (0 = nothing), or
  // a commit to both neighbours.
  struct Sends {
    uint32_t to_successor = 0;
    uint32_t to_predecessor = 0;
    bool commit = false;
  };

  explicit CommitRound(uint32_t world) : world_(world) {}

  Sends prepared();                          // our data is in and the successor agreed
  Sends fromPredecessor(uint32_t streak);    // a kPrepared from the predecessor
  Sends fromSuccessor(uint32_t streak);      // a kPrepared from the successor
  Sends commitReceived();                    // a kCommit from either neighbour

  bool isPrepared() const { return prepared_; }
  bool isCommitted() const { return committed_; }

 private:
  Sends next();

  uint32_t world_;
  bool prepared_ = false;
  bool committed_ = false;
  uint32_t behind_ = 0;  // consecutive prepared peers before us (predecessor, its predecessor, ...)
  uint32_t ahead_ = 0;   // consecutive prepared peers after us
  uint32_t sent_succ_ = 0, sent_pred_ = 0;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_COMMIT_ROUND_HPP_
