#include "schedules.hpp"

#include <memory>
#include <utility>
#include <vector>

#include "collective/partition.hpp"
#include "wire/data.hpp"

namespace pccl::sim {

namespace {
using collective::Span;

// RingCollective's all-reduce (kind kAllReduce, uncoded): chunk c = chunkOf(count, N, c).
class RingAllReduce : public Schedule {
 public:
  RingAllReduce(Ports& ports, const CallSpec& c)
      : ports_(ports), spec_(c), phases_(collective::phaseCount(c.world)),
        segment_elems_(collective::segmentElems(c.count, c.world, c.elem_bytes, c.segment_bytes)),
        members_(c.world) {
    for (uint32_t i = 0; i < c.world; ++i) chunks_.push_back(collective::chunkOf(c.count, c.world, i));
    for (uint32_t r = 0; r < c.world; ++r) {
      for (uint32_t p = 0; p < phases_; ++p) {
        members_[r].recv_expected += segmentsOf(collective::recvChunk(r, c.world, p));
        members_[r].send_expected += segmentsOf(collective::sendChunk(r, c.world, p));
      }
    }
  }

  void start(uint32_t r) override {
    const size_t n = segmentsOf(collective::sendChunk(r, spec_.world, 0));
    for (size_t s = 0; s < n; ++s) sendSegment(r, 0, s);
  }

  void successorReady(uint32_t r) override {
    Member& m = members_[r];
    if (m.ready) return;
    m.ready = true;
    std::vector<std::pair<uint32_t, uint64_t>> held = std::move(m.held);
    m.held.clear();
    for (const auto& [phase, segment] : held) sendSegment(r, phase, segment);
  }

  void delivered(uint32_t r, uint32_t phase, uint64_t segment, uint64_t /*bytes*/) override {
    ++members_[r].recv_done;
    // Reduce phase: combined with our input, then on as the next phase; all-gather: passed on.
    if (phase + 1 < phases_) sendSegment(r, phase + 1, segment);
  }

  bool complete(uint32_t r) const override {
    const Member& m = members_[r];
    return m.recv_done >= m.recv_expected && ports_.sendsDone(r) >= m.send_expected;
  }

 private:
  struct Member {
    uint64_t recv_expected = 0, send_expected = 0, recv_done = 0, eager_sent = 0;
    bool ready = false;
    std::vector<std::pair<uint32_t, uint64_t>> held;  // (phase, segment) waiting for the hello
  };

  size_t segmentsOf(uint32_t chunk) const { return collective::segmentCount(chunks_[chunk].count, segment_elems_); }

  void sendSegment(uint32_t r, uint32_t phase, uint64_t segment) {
    const Span c = chunks_[collective::sendChunk(r, spec_.world, phase)];
    const uint64_t bytes = collective::segmentOf(c.count, segment_elems_, segment).count * spec_.elem_bytes;
    Member& m = members_[r];
    if (!m.ready) {
      if (m.eager_sent + bytes > wire::kEagerBytes) {
        m.held.emplace_back(phase, segment);
        return;
      }
      m.eager_sent += bytes;
    }
    ports_.send(r, (r + 1) % spec_.world, phase, segment, bytes);
  }

  Ports& ports_;
  CallSpec spec_;
  uint32_t phases_;
  size_t segment_elems_;
  std::vector<Span> chunks_;
  std::vector<Member> members_;
};

// GatherAllReduce: the frame's phase is the input's origin rank.
class GatherAllReduce : public Schedule {
 public:
  GatherAllReduce(Ports& ports, const CallSpec& c)
      : ports_(ports), spec_(c), segment_elems_(collective::segmentElems(c.count, 1, c.elem_bytes, c.segment_bytes)),
        segments_(collective::segmentCount(c.count, segment_elems_)), cw_(c.world / 2), ccw_(c.world - 1 - cw_),
        recv_done_(c.world, 0) {
    if (c.world < 2) return;  // alone: nothing moves (Operation ends the call at once)
    recv_expected_ = static_cast<uint64_t>(c.world - 1) * segments_;
    const uint64_t forwards = (cw_ - 1) + (ccw_ > 0 ? ccw_ - 1 : 0);
    send_expected_ = segments_ * ((ccw_ > 0 ? 2 : 1) + forwards);
  }

  void start(uint32_t r) override {
    for (uint64_t s = 0; s < segments_; ++s) {
      sendSlot(r, successor(r), r, s);
      if (ccw_ > 0) sendSlot(r, predecessor(r), r, s);
    }
  }

  void delivered(uint32_t r, uint32_t origin, uint64_t segment, uint64_t /*bytes*/) override {
    ++recv_done_[r];
    const uint32_t n = spec_.world;
    const uint32_t behind = (r + n - origin) % n;  // hops it came from the predecessor's side
    if (behind <= cw_) {
      if (behind < cw_) sendSlot(r, successor(r), origin, segment);
    } else if (n - behind < ccw_) {
      sendSlot(r, predecessor(r), origin, segment);
    }
  }

  bool complete(uint32_t r) const override {
    return recv_done_[r] >= recv_expected_ && ports_.sendsDone(r) >= send_expected_;
  }

 private:
  uint32_t successor(uint32_t r) const { return (r + 1) % spec_.world; }
  uint32_t predecessor(uint32_t r) const { return (r + spec_.world - 1) % spec_.world; }
  void sendSlot(uint32_t r, uint32_t to, uint32_t origin, uint64_t s) {
    ports_.send(r, to, origin, s, collective::segmentOf(spec_.count, segment_elems_, s).count * spec_.elem_bytes);
  }

  Ports& ports_;
  CallSpec spec_;
  size_t segment_elems_;
  uint64_t segments_;
  uint32_t cw_, ccw_;
  uint64_t recv_expected_ = 0, send_expected_ = 0;
  std::vector<uint64_t> recv_done_;
};
}  // namespace

const char* algorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kGather: return "gather";
  }
  return "?";
}

bool parseAlgorithm(const std::string& name, Algorithm* out) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kGather}) {
    if (name == algorithmName(a)) return *out = a, true;
  }
  return false;
}

Algorithm libraryChoice(const CallSpec& spec, uint64_t gather_bytes) {
  return collective::gathers(spec.world, spec.count * spec.elem_bytes, gather_bytes, wire::kEagerBytes)
             ? Algorithm::kGather
             : Algorithm::kRing;
}

bool runnable(Algorithm a, const CallSpec& spec) {
  if (a == Algorithm::kGather) return libraryChoice(spec, wire::kEagerBytes) == Algorithm::kGather;
  return true;
}

Operation::MakeSchedule makeSchedule(Algorithm a, const CallSpec& spec) {
  return [a, spec](Ports& ports) -> std::unique_ptr<Schedule> {
    if (a == Algorithm::kGather) return std::make_unique<GatherAllReduce>(ports, spec);
    return std::make_unique<RingAllReduce>(ports, spec);
  };
}

}  // namespace pccl::sim
