#include "collective/two_level_gather.hpp"

#include <memory>
#include <utility>

#include "collective/gather_allreduce.hpp"

namespace pccl::collective {

TwoLevelGather::TwoLevelGather(const RingOpSpec& base, const TwoLevelGatherPlan& plan, const StriperTo& striper_to,
                               BufferPool* buffers, Finished finished)
    : CompositeOp(base, stripersTo(plan.receivers(), striper_to), buffers, std::move(finished)), plan_(plan) {
  const size_t elem = codec::dtypeSize(base_.dtype);
  const size_t segment_bytes = base_.desc.segment_bytes;
  if (plan_.region_world > 1) {
    // The LAN level: full precision, avg sums (part 1 divides by the group's size).
    RingOpSpec region = lanLevel(base_);
    region.world = plan_.region_world;
    region.rank = plan_.region_rank;
    region.phase_base = static_cast<uint32_t>(kRegion) << kPartShift;
    region.segment_elems = gatherSegmentElems(region, kSegmentFloorBytes);  // the LAN
    auto succ = striper_to(plan_.region_succ), pred = striper_to(plan_.region_pred);
    const size_t wire_at = reserveWire(gatherRegionBytes(region));
    Part& p = addPart(kRegion, 0, kRegion, plan_.region_pred, plan_.region_succ,
                      [this, region, succ, pred, elem, wire_at](Part& part) {
                        RingOpSpec s = region;
                        // Only the leader reduces: the others forward, then take the leader's result.
                        if (plan_.leader) reduced_ = own(s.count * elem);
                        s.output = reduced_;
                        s.wire = wireAt(wire_at);
                        return std::make_shared<GatherAllReduce>(s, succ, pred, partDone(part.id));
                      });
    p.both_ways = true;
    RingOpSpec bcast = region;
    bcast.kind = wire::Collective::kBroadcast;
    bcast.root = 0;
    bcast.input = base_.output;  // the leader's result, sent from where it is
    bcast.phase_base = static_cast<uint32_t>(kBroadcast) << kPartShift;
    bcast.segment_elems = segmentElems(base_.count, 1, elem, segment_bytes);
    auto to = striper_to(plan_.region_succ);
    addPart(kBroadcast, 0, kBroadcast, plan_.region_pred, plan_.region_succ, [this, bcast, to](Part& part) {
      return std::make_shared<RingCollective>(bcast, to, partDone(part.id));
    });
  }
  if (plan_.leader && plan_.regions > 1) {
    RingOpSpec across = base_;
    across.world = plan_.regions;
    across.rank = plan_.region;
    across.avg_divisor = base_.world;
    across.phase_base = static_cast<uint32_t>(kAcross) << kPartShift;
    across.segment_elems = gatherSegmentElems(across, kWanSegmentFloorBytes);  // the WAN
    auto succ = striper_to(plan_.leader_succ), pred = striper_to(plan_.leader_pred);
    const size_t wire_at = reserveWire(gatherRegionBytes(across));
    Part& p = addPart(kAcross, 0, kAcross, plan_.leader_pred, plan_.leader_succ,
                      [this, across, succ, pred, wire_at](Part& part) {
                        RingOpSpec s = across;
                        if (plan_.region_world > 1) s.input = reduced_;  // part 0 has finished
                        s.wire = wireAt(wire_at);
                        return std::make_shared<GatherAllReduce>(s, succ, pred, partDone(part.id));
                      });
    p.both_ways = true;
  }
}

void TwoLevelGather::start() {
  if (plan_.region_world == 1) {
    if (Part* across = find(kAcross)) startPart(*across);
  } else {
    startPart(*find(kRegion));
    if (!plan_.leader && !over()) startPart(*find(kBroadcast));  // it receives and forwards
  }
  maybeFinish();
}

void TwoLevelGather::partFinished(Part& p) {
  if (!plan_.leader) return;
  if (p.kind == kRegion) {
    if (Part* across = find(kAcross)) startPart(*across);
  } else if (p.kind == kAcross) {
    if (Part* bcast = find(kBroadcast)) startPart(*bcast);
  }
}

}  // namespace pccl::collective
