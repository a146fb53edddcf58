#include "schedules.hpp"

#include <memory>
#include <utility>
#include <vector>

#include "collective/partition.hpp"
#include "collective/region_layout.hpp"
#include "collective/two_level_rules.hpp"
#include "ring_parts.hpp"
#include "two_level_schedules.hpp"
#include "wire/data.hpp"

namespace pccl::sim {

namespace {
// RingCollective's all-reduce (kind kAllReduce, uncoded) on the group's ring: one part per member.
class RingAllReduce : public Schedule {
 public:
  RingAllReduce(Ports& ports, const CallSpec& c) : ports_(ports) {
    const auto cut = ringCut(RingKind::kAllReduce, c.count, c.world,
                             collective::segmentElems(c.count, c.world, c.elem_bytes, c.segment_bytes), c.elem_bytes);
    for (uint32_t r = 0; r < c.world; ++r) parts_.emplace_back(cut, r, r, (r + 1) % c.world, 0, wire::kEagerBytes);
  }
  void start(uint32_t r) override { parts_[r].start(ports_); }
  void readyFrom(uint32_t r, uint32_t /*from*/) override { parts_[r].ready(ports_); }
  void delivered(uint32_t r, uint32_t phase, uint64_t segment, uint64_t /*bytes*/) override {
    parts_[r].delivered(ports_, phase, segment);
  }
  void sent(uint32_t r, uint32_t /*phase*/, uint64_t /*segment*/) override { parts_[r].sent(); }
  bool complete(uint32_t r) const override { return parts_[r].finished(); }

 private:
  Ports& ports_;
  std::vector<RingPart> parts_;
};

// GatherAllReduce on the group's ring: the frame's phase is the input's origin rank.
class GatherAllReduce : public Schedule {
 public:
  GatherAllReduce(Ports& ports, const CallSpec& c) : ports_(ports) {
    // The members are on different hosts: the gather's floor across hosts (gatherSegmentFloor).
    const size_t seg = collective::segmentElems(c.count, 1, c.elem_bytes, c.segment_bytes,
                                                collective::kWanSegmentFloorBytes);
    for (uint32_t r = 0; r < c.world; ++r) {
      parts_.emplace_back(c.world, r, r, (r + 1) % c.world, (r + c.world - 1) % c.world, c.count, seg, c.elem_bytes, 0);
    }
  }
  void start(uint32_t r) override { parts_[r].start(ports_); }
  void delivered(uint32_t r, uint32_t origin, uint64_t segment, uint64_t /*bytes*/) override {
    parts_[r].delivered(ports_, origin, segment);
  }
  void sent(uint32_t r, uint32_t /*phase*/, uint64_t /*segment*/) override { parts_[r].sent(); }
  bool complete(uint32_t r) const override { return parts_[r].finished(); }

 private:
  Ports& ports_;
  std::vector<GatherPart> parts_;
};

bool hasLevels(const CallSpec& spec) {
  return spec.regions && !spec.regions->layout.flat() && spec.regions->pieces() <= collective::kMaxTwoLevelPieces;
}

bool twoLevelGathers(const CallSpec& spec, uint64_t gather_bytes) {
  const uint64_t bytes = spec.count * spec.elem_bytes;  // uncoded: the wire bytes are the raw ones
  return hasLevels(spec) && spec.count > 0 &&
         collective::twoLevelGathers(spec.regions->layout.regions(), spec.world, bytes, bytes, gather_bytes,
                                     wire::kEagerBytes);
}
}  // namespace

const char* algorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kGather: return "gather";
    case Algorithm::kTwoLevel: return "two-level";
    case Algorithm::kTwoLevelGather: return "two-level-gather";
  }
  return "?";
}

bool parseAlgorithm(const std::string& name, Algorithm* out) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kGather, Algorithm::kTwoLevel, Algorithm::kTwoLevelGather}) {
    if (name == algorithmName(a)) return *out = a, true;
  }
  return false;
}

std::shared_ptr<const collective::TwoLevelRing> twoLevelRingOf(const std::vector<std::string>& region_by_rank) {
  return std::make_shared<const collective::TwoLevelRing>(
      collective::twoLevelRing(collective::regionLayout(region_by_rank)));
}

Algorithm libraryChoice(const CallSpec& spec, uint64_t gather_bytes) {
  if (spec.world < 2 || spec.count == 0) return Algorithm::kRing;
  const bool two_level = spec.two_level_group && hasLevels(spec);
  if (two_level && twoLevelGathers(spec, gather_bytes)) return Algorithm::kTwoLevelGather;
  if (collective::gathers(spec.world, spec.count * spec.elem_bytes, gather_bytes, wire::kEagerBytes)) {
    return Algorithm::kGather;
  }
  return two_level && spec.count * spec.elem_bytes >= spec.regions->min_bytes ? Algorithm::kTwoLevel : Algorithm::kRing;
}

bool runnable(Algorithm a, const CallSpec& spec) {
  switch (a) {
    case Algorithm::kGather:
      return collective::gathers(spec.world, spec.count * spec.elem_bytes, wire::kEagerBytes, wire::kEagerBytes);
    case Algorithm::kTwoLevel: return hasLevels(spec) && spec.count > 0;
    case Algorithm::kTwoLevelGather: return twoLevelGathers(spec, wire::kEagerBytes);
    case Algorithm::kRing: return true;
  }
  return false;
}

Operation::MakeSchedule makeSchedule(Algorithm a, const CallSpec& spec) {
  return [a, spec](Ports& ports) -> std::unique_ptr<Schedule> {
    switch (a) {
      case Algorithm::kGather: return std::make_unique<GatherAllReduce>(ports, spec);
      case Algorithm::kTwoLevel: return makeTwoLevelAllReduce(ports, spec);
      case Algorithm::kTwoLevelGather: return makeTwoLevelGather(ports, spec);
      case Algorithm::kRing: break;
    }
    return std::make_unique<RingAllReduce>(ports, spec);
  };
}

}  // namespace pccl::sim
