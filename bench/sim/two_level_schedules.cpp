#include "two_level_schedules.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "collective/composite_op.hpp"
#include "collective/partition.hpp"
#include "collective/two_level_rules.hpp"
#include "ring_parts.hpp"
#include "wire/data.hpp"

namespace pccl::sim {

namespace {
using collective::kPartShift;
using collective::Span;
using collective::TwoLevelCall;
using collective::TwoLevelRing;

uint32_t partOf(uint32_t phase) { return phase >> kPartShift; }
uint32_t localPhase(uint32_t phase) { return phase & ((1u << kPartShift) - 1); }

// A part of a composite on one member: its ring, when it started, what came before.
template <typename Ring>
struct Part {
  Part(uint32_t id_, uint32_t wave_, int kind_, Ring ring_) : id(id_), wave(wave_), kind(kind_), ring(std::move(ring_)) {}
  uint32_t id, wave;
  int kind;
  Ring ring;
  bool started = false, done = false;
  std::vector<std::pair<uint32_t, uint64_t>> deferred;  // (local phase, segment) before it started
};

// TwoLevelAllReduce / TwoLevelWaves.
class TwoLevelAllReduce : public Schedule {
 public:
  TwoLevelAllReduce(Ports& ports, const CallSpec& c) : ports_(ports), members_(c.world) {
    const TwoLevelRing& ring = *c.regions;
    pieces_ = ring.pieces();
    // The sub-rings' cuts, shared by their members: (wave, region) for the region's two LAN parts,
    // (wave, piece) for a piece.
    std::map<std::pair<uint32_t, uint32_t>, std::shared_ptr<const RingCut>> rs, ag, wan;
    for (uint32_t r = 0; r < c.world; ++r) {
      Member& m = members_[r];
      const TwoLevelCall call = collective::twoLevelCall(ring, r, c.count, c.elem_bytes);
      m.hello_to = call.senders();
      m.pieces_left.assign(call.waves.size(), 0);
      m.index.assign(call.waves.size() * (pieces_ + 2), -1);
      for (uint32_t w = 0; w < call.waves.size(); ++w) {
        const collective::TwoLevelPart& plan = call.parts[w];
        const Span wave = call.waves[w];
        if (plan.region_world > 1) {
          const auto key = std::make_pair(w, plan.region);
          if (!rs.count(key)) {
            const size_t seg = collective::segmentElems(wave.count, plan.region_world, c.elem_bytes, c.segment_bytes);
            rs[key] = ringCut(RingKind::kReduceScatter, wave.count, plan.region_world, seg, c.elem_bytes, plan.blocks);
            ag[key] = ringCut(RingKind::kAllGather, wave.count, plan.region_world, seg, c.elem_bytes, plan.blocks);
          }
          const uint64_t eager = collective::twoLevelEagerShare(call, plan.region_succ, 2, wire::kEagerBytes);
          add(m, partId(w, kFirstLan), w, kFirstLan,
              RingPart(rs[key], plan.region_rank, r, plan.region_succ, partId(w, kFirstLan) << kPartShift, eager));
          add(m, partId(w, kSecondLan), w, kSecondLan,
              RingPart(ag[key], plan.region_rank, r, plan.region_succ, partId(w, kSecondLan) << kPartShift, eager));
        }
        for (const auto& piece : plan.pieces) {
          const auto key = std::make_pair(w, piece.id);
          if (!wan.count(key)) {
            const size_t seg = collective::segmentElems(piece.span.count, plan.regions, c.elem_bytes, c.segment_bytes,
                                                      collective::kWanSegmentFloorBytes);
            wan[key] = ringCut(RingKind::kAllReduce, piece.span.count, plan.regions, seg, c.elem_bytes);
          }
          const uint32_t id = partId(w, kPiece, piece.id);
          const uint64_t eager = collective::twoLevelEagerShare(call, piece.succ, 2, wire::kEagerBytes);
          add(m, id, w, kPiece, RingPart(wan[key], plan.region, r, piece.succ, id << kPartShift, eager));
          ++m.pieces_left[w];
        }
      }
    }
  }

  void start(uint32_t r) override {
    Member& m = members_[r];
    if (Part<RingPart>* first = find(m, partId(0, kFirstLan))) {
      startPart(r, *first);
    } else {
      for (uint32_t w = 0; w < m.pieces_left.size(); ++w) startPieces(r, w);
    }
  }

  void delivered(uint32_t r, uint32_t phase, uint64_t segment, uint64_t /*bytes*/) override {
    Part<RingPart>* p = find(members_[r], partOf(phase));
    if (p == nullptr) return;
    if (!p->started) {
      p->deferred.emplace_back(localPhase(phase), segment);
      return;
    }
    p->ring.delivered(ports_, localPhase(phase), segment);
    check(r, *p);
  }

  void sent(uint32_t r, uint32_t phase, uint64_t /*segment*/) override {
    Part<RingPart>* p = find(members_[r], partOf(phase));
    if (p == nullptr) return;
    p->ring.sent();
    check(r, *p);
  }

  // CompositeOp::readyFrom: every part sending to `from`.
  void readyFrom(uint32_t r, uint32_t from) override {
    Member& m = members_[r];
    if (std::find(m.ready_from.begin(), m.ready_from.end(), from) != m.ready_from.end()) return;
    m.ready_from.push_back(from);
    for (Part<RingPart>& p : m.parts) {
      if (p.started && p.ring.succ() == from) p.ring.ready(ports_);
    }
  }

  std::vector<uint32_t> helloTo(uint32_t r) const override { return members_[r].hello_to; }
  bool complete(uint32_t r) const override { return members_[r].done == members_[r].parts.size(); }

 private:
  enum Kind : int { kFirstLan = 0, kSecondLan = 1, kPiece = 2 };
  struct Member {
    std::vector<Part<RingPart>> parts;
    std::vector<int32_t> index;  // part id -> parts, -1: not ours
    std::vector<size_t> pieces_left;  // per wave
    std::vector<uint32_t> hello_to, ready_from;
    size_t done = 0;
  };

  uint32_t partId(uint32_t wave, Kind kind, uint32_t piece = 0) const {
    return wave * static_cast<uint32_t>(pieces_ + 2) + static_cast<uint32_t>(kind) + piece;
  }
  static void add(Member& m, uint32_t id, uint32_t wave, Kind kind, RingPart ring) {
    m.index[id] = static_cast<int32_t>(m.parts.size());
    m.parts.emplace_back(id, wave, kind, std::move(ring));
  }
  static Part<RingPart>* find(Member& m, uint32_t id) {
    return id < m.index.size() && m.index[id] >= 0 ? &m.parts[static_cast<size_t>(m.index[id])] : nullptr;
  }
  Part<RingPart>* find(Member& m, uint32_t wave, Kind kind) {
    return wave < m.pieces_left.size() ? find(m, partId(wave, kind)) : nullptr;
  }

  // CompositeOp::startPart: start, the hello if it came, then what came before.
  void startPart(uint32_t r, Part<RingPart>& p) {
    if (p.started) return;
    p.started = true;
    Member& m = members_[r];
    p.ring.start(ports_);
    if (std::find(m.ready_from.begin(), m.ready_from.end(), p.ring.succ()) != m.ready_from.end()) p.ring.ready(ports_);
    std::vector<std::pair<uint32_t, uint64_t>> deferred = std::move(p.deferred);
    p.deferred.clear();
    for (const auto& [phase, segment] : deferred) p.ring.delivered(ports_, phase, segment);
    check(r, p);
  }

  void startPieces(uint32_t r, uint32_t wave) {
    Member& m = members_[r];
    for (Part<RingPart>& q : m.parts) {
      if (q.wave == wave && q.kind == kPiece) startPart(r, q);
    }
    if (m.pieces_left[wave] == 0) {
      if (Part<RingPart>* second = find(m, wave, kSecondLan)) startPart(r, *second);
    }
  }

  // A part that has everything in and every send done has finished: TwoLevelWaves::partFinished.
  void check(uint32_t r, Part<RingPart>& p) {
    if (p.done || !p.started || !p.ring.finished()) return;
    p.done = true;
    Member& m = members_[r];
    ++m.done;
    const uint32_t wave = p.wave;
    if (p.kind == kFirstLan) {
      if (Part<RingPart>* next = find(m, wave + 1, kFirstLan)) startPart(r, *next);
      startPieces(r, wave);
    } else if (p.kind == kPiece && --m.pieces_left[wave] == 0) {
      if (Part<RingPart>* second = find(m, wave, kSecondLan)) startPart(r, *second);
    }
  }

  Ports& ports_;
  size_t pieces_ = 0;
  std::vector<Member> members_;
};

// TwoLevelGather: parts 0 (the region's gather), 1 (the leaders' gather), 2 (the region's broadcast).
class TwoLevelGather : public Schedule {
 public:
  TwoLevelGather(Ports& ports, const CallSpec& c) : ports_(ports), members_(c.world) {
    const size_t seg = collective::segmentElems(c.count, 1, c.elem_bytes, c.segment_bytes);
    // The leaders' gather crosses the WAN: its finer floor (TwoLevelGather in the library).
    const size_t wan_seg = collective::segmentElems(c.count, 1, c.elem_bytes, c.segment_bytes,
                                                    collective::kWanSegmentFloorBytes);
    std::map<uint32_t, std::shared_ptr<const RingCut>> bcast;  // per region size
    for (uint32_t r = 0; r < c.world; ++r) {
      Member& m = members_[r];
      m.plan = collective::twoLevelGatherPlan(*c.regions, r);
      const auto& plan = m.plan;
      if (plan.region_world > 1) {
        m.region.emplace(GatherPart(plan.region_world, plan.region_rank, r, plan.region_succ, plan.region_pred,
                                    c.count, seg, c.elem_bytes, kRegion << kPartShift));
        auto& cut = bcast[plan.region_world];
        if (!cut) cut = ringCut(RingKind::kBroadcast, c.count, plan.region_world, seg, c.elem_bytes, {}, 0);
        m.bcast.emplace(RingPart(cut, plan.region_rank, r, plan.region_succ, kBroadcast << kPartShift,
                                 wire::kEagerBytes));
      }
      if (plan.leader && plan.regions > 1) {
        m.across.emplace(GatherPart(plan.regions, plan.region, r, plan.leader_succ, plan.leader_pred, c.count,
                                    wan_seg, c.elem_bytes, kAcross << kPartShift));
      }
    }
  }

  void start(uint32_t r) override {
    Member& m = members_[r];
    if (m.plan.region_world == 1) {
      if (m.across) startPart(r, kAcross);
    } else {
      startPart(r, kRegion);
      if (!m.plan.leader) startPart(r, kBroadcast);  // it receives and forwards
    }
  }

  void delivered(uint32_t r, uint32_t phase, uint64_t segment, uint64_t /*bytes*/) override {
    Member& m = members_[r];
    const int kind = static_cast<int>(partOf(phase));
    if (kind > kBroadcast || !m.started[kind]) {
      if (kind <= kBroadcast) m.deferred[kind].emplace_back(localPhase(phase), segment);
      return;
    }
    deliver(r, kind, localPhase(phase), segment);
    check(r);
  }

  void sent(uint32_t r, uint32_t phase, uint64_t /*segment*/) override {
    Member& m = members_[r];
    switch (static_cast<int>(partOf(phase))) {
      case kRegion: m.region->sent(); break;
      case kAcross: m.across->sent(); break;
      case kBroadcast: m.bcast->sent(); break;
      default: return;
    }
    check(r);
  }

  void readyFrom(uint32_t r, uint32_t from) override {
    Member& m = members_[r];
    if (m.bcast && m.bcast->succ() == from) {
      m.bcast_ready = true;
      if (m.started[kBroadcast]) m.bcast->ready(ports_);
    }
  }

  bool complete(uint32_t r) const override {
    const Member& m = members_[r];
    return (!m.region || m.done[kRegion]) && (!m.across || m.done[kAcross]) && (!m.bcast || m.done[kBroadcast]);
  }

 private:
  enum Kind : int { kRegion = 0, kAcross = 1, kBroadcast = 2 };
  struct Member {
    collective::TwoLevelGatherPlan plan;
    std::optional<GatherPart> region, across;
    std::optional<RingPart> bcast;
    bool bcast_ready = false;
    bool started[3] = {false, false, false}, done[3] = {false, false, false};
    std::vector<std::pair<uint32_t, uint64_t>> deferred[3];
  };

  void deliver(uint32_t r, int kind, uint32_t phase, uint64_t segment) {
    Member& m = members_[r];
    if (kind == kRegion) m.region->delivered(ports_, phase, segment);
    if (kind == kAcross) m.across->delivered(ports_, phase, segment);
    if (kind == kBroadcast) m.bcast->delivered(ports_, phase, segment);
  }

  void startPart(uint32_t r, int kind) {
    Member& m = members_[r];
    if (m.started[kind]) return;
    m.started[kind] = true;
    if (kind == kRegion) m.region->start(ports_);
    if (kind == kAcross) m.across->start(ports_);
    if (kind == kBroadcast) {
      m.bcast->start(ports_);
      if (m.bcast_ready) m.bcast->ready(ports_);
    }
    std::vector<std::pair<uint32_t, uint64_t>> deferred = std::move(m.deferred[kind]);
    m.deferred[kind].clear();
    for (const auto& [phase, segment] : deferred) deliver(r, kind, phase, segment);
    check(r);
  }

  bool finished(const Member& m, int kind) const {
    switch (kind) {
      case kRegion: return m.region->finished();
      case kAcross: return m.across->finished();
      default: return m.bcast->finished();
    }
  }

  // Parts that finished, and what waited for them (TwoLevelGather::partFinished: the leader's chain).
  void check(uint32_t r) {
    Member& m = members_[r];
    for (int kind : {kRegion, kAcross, kBroadcast}) {
      if (!m.started[kind] || m.done[kind] || !finished(m, kind)) continue;
      m.done[kind] = true;
      if (!m.plan.leader) continue;
      if (kind == kRegion && m.across) startPart(r, kAcross);
      if (kind == kAcross && m.bcast) startPart(r, kBroadcast);
    }
  }

  Ports& ports_;
  std::vector<Member> members_;
};
}  // namespace

std::unique_ptr<Schedule> makeTwoLevelAllReduce(Ports& ports, const CallSpec& spec) {
  return std::make_unique<TwoLevelAllReduce>(ports, spec);
}

std::unique_ptr<Schedule> makeTwoLevelGather(Ports& ports, const CallSpec& spec) {
  return std::make_unique<TwoLevelGather>(ports, spec);
}

}  // namespace pccl::sim
