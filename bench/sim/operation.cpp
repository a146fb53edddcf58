#include "operation.hpp"

#include <utility>

namespace pccl::sim {

Operation::Operation(Engine& engine, std::vector<uint32_t> peers, const MakeSchedule& make, Ended ended)
    : engine_(engine), world_(static_cast<uint32_t>(peers.size())), ended_(std::move(ended)), times_(peers.size()),
      sent_bytes_(peers.size(), 0) {
  members_.reserve(world_);
  for (uint32_t r = 0; r < world_; ++r) members_.emplace_back(world_);
  index_ = engine_.add(this, std::move(peers));
  schedule_ = make(*this);
}

void Operation::callAt(uint32_t rank, Time t) { engine_.at(t, index_, rank, 0); }

void Operation::timer(uint32_t rank, uint64_t /*token*/, Time t) { call(rank, t); }

Frame Operation::frame(uint32_t from, uint32_t to, Kind kind, uint32_t a, uint64_t b) const {
  Frame f;
  f.op = index_;
  f.from = from;
  f.to = to;
  f.kind = kind;
  f.a = a;
  f.b = b;
  return f;
}

void Operation::send(uint32_t from, uint32_t to, uint32_t phase, uint64_t segment, uint64_t bytes) {
  Frame f = frame(from, to, kData, phase, segment);
  f.bytes = bytes;
  sent_bytes_[from] += bytes;
  engine_.send(f);
}

// A ring control frame to a neighbour; b says which way it went (1: to the successor), so that the
// receiver knows which side it came from even when both neighbours are one peer (a ring of two).
void Operation::control(uint32_t from, bool to_successor, Kind kind, uint32_t value) {
  Frame f = frame(from, to_successor ? successor(from) : predecessor(from), kind, value, to_successor ? 1 : 0);
  f.control = true;
  engine_.send(f);
}

void Operation::call(uint32_t rank, Time t) {
  Member& m = members_[rank];
  if (m.called) return;
  m.called = true;
  times_[rank].start = t;
  if (world_ == 1) {  // alone: the result is the input
    times_[rank].data_in = times_[rank].prepared = times_[rank].end = t;
    m.committed = true;
    if (ended_) ended_(rank, t);
    return;
  }
  control(rank, false, kHello, 0);
  schedule_->start(rank);
  // What came before the call is used now, as Collectives does: the successor's hello, then the frames
  // in the order they came.
  if (m.hello) helloArrived(rank, t);
  std::vector<Frame> early = std::move(m.early);
  for (const Frame& f : early) schedule_->delivered(rank, f.a, f.b, f.bytes);
  maybeDataIn(rank, t);
}

void Operation::sent(const Frame& f, Time t) {
  if (f.control) return;
  ++members_[f.from].sends_done;
  maybeDataIn(f.from, t);
}

void Operation::delivered(const Frame& f, Time t) {
  Member& m = members_[f.to];
  switch (f.kind) {
    case kData:
      if (!m.called) {
        m.early.push_back(f);
        return;
      }
      schedule_->delivered(f.to, f.a, f.b, f.bytes);
      return maybeDataIn(f.to, t);
    case kHello:
      m.hello = true;
      if (m.called) helloArrived(f.to, t);
      return;
    case kPrepared:
      return apply(f.to, f.b == 1 ? m.commit.fromPredecessor(f.a) : m.commit.fromSuccessor(f.a), t);
    case kCommit:
      return apply(f.to, m.commit.commitReceived(), t);
    default:
      return;
  }
}

void Operation::helloArrived(uint32_t rank, Time t) {
  schedule_->successorReady(rank);
  maybePrepared(rank, t);
}

void Operation::maybeDataIn(uint32_t rank, Time t) {
  Member& m = members_[rank];
  if (!m.called || m.data_in || !schedule_->complete(rank)) return;
  m.data_in = true;
  times_[rank].data_in = t;
  maybePrepared(rank, t);
}

void Operation::maybePrepared(uint32_t rank, Time t) {
  Member& m = members_[rank];
  if (m.prepared || !m.data_in || !m.hello) return;
  m.prepared = true;
  times_[rank].prepared = t;
  apply(rank, m.commit.prepared(), t);
}

void Operation::apply(uint32_t rank, const collective::CommitRound::Sends& s, Time t) {
  Member& m = members_[rank];
  if (s.commit) {
    control(rank, true, kCommit, 0);
    control(rank, false, kCommit, 0);
    if (!m.committed) {
      m.committed = true;
      times_[rank].end = t;
      if (ended_) ended_(rank, t);
    }
    return;
  }
  if (s.to_successor != 0) control(rank, true, kPrepared, s.to_successor);
  if (s.to_predecessor != 0) control(rank, false, kPrepared, s.to_predecessor);
}

}  // namespace pccl::sim
