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
  pair_bytes_[static_cast<uint64_t>(from) * world_ + to] += bytes;
  engine_.send(f);
}

// A ring control frame to a neighbour; b says which way it went (1: to the successor), so that the
// receiver knows which side it came from even when both neighbours are one peer (a ring of two).
void Operation::control(uint32_t from, bool to_successor, Kind kind, uint32_t value) {
  Frame f = frame(from, to_successor ? successor(from) : predecessor(from), kind, value,
                  to_successor ? kToSuccessor : kToPredecessor);
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
  for (uint32_t to : schedule_->helloTo(rank)) {
    if (to == predecessor(rank) || to == rank) continue;  // it has ours already
    Frame f = frame(rank, to, kHello, 0, kToOther);
    f.control = true;
    engine_.send(f);
  }
  // What came before the call is used now, as Collectives does: the hellos, then the frames in the
  // order they came.
  if (m.hello) helloArrived(rank, t);
  for (uint32_t from : m.early_hellos) schedule_->readyFrom(rank, from);
  m.early_hellos.clear();
  std::vector<Frame> early = std::move(m.early);
  for (const Frame& f : early) schedule_->delivered(rank, f.a, f.b, f.bytes);
  maybeDataIn(rank, t);
}

void Operation::sent(const Frame& f, Time t) {
  if (f.control) return;
  ++members_[f.from].sends_done;
  schedule_->sent(f.from, f.a, f.b);
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
      if (f.b == kToOther) {  // a two-level sender's: lifts our eager limit towards it only
        if (!m.called) return m.early_hellos.push_back(f.from);
        schedule_->readyFrom(f.to, f.from);
        return maybeDataIn(f.to, t);
      }
      m.hello = true;
      if (m.called) helloArrived(f.to, t);
      return;
    case kPrepared:
      return apply(f.to, f.b == kToSuccessor ? m.commit.fromPredecessor(f.a) : m.commit.fromSuccessor(f.a), t);
    case kCommit:
      return apply(f.to, m.commit.commitReceived(), t);
    default:
      return;
  }
}

void Operation::helloArrived(uint32_t rank, Time t) {
  schedule_->readyFrom(rank, successor(rank));
  maybeDataIn(rank, t);
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
