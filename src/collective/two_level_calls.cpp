// Collectives, the two-level side (docs/algorithms.md §12): the links to the members a two-level call
// exchanges data with besides the ring neighbours, whose frames come from whom, the hellos to and from
// them, and the start of a two-level call (two_level_allreduce.hpp). The commit round, aborts and the
// master's part stay on the flat ring (collectives.cpp, ring_frames.cpp, op_reports.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "codec/quant.hpp"
#include "collective/collectives.hpp"
#include "collective/two_level_allgather.hpp"
#include "collective/two_level_allreduce.hpp"
#include "collective/two_level_broadcast.hpp"
#include "collective/two_level_gather.hpp"
#include "collective/two_level_reduce_scatter.hpp"
#include "collective/two_level_rules.hpp"
#include "util/log.hpp"

namespace pccl::collective {

namespace {
constexpr const char* kLog = "collective";
}  // namespace

void Collectives::setTwoLevel(std::shared_ptr<const TwoLevelRing> plan, std::vector<PeerLink> links) {
  two_level_ = std::move(plan);
  links_.clear();
  for (auto& l : links) {
    tuneForStriping(l.channels);
    auto striper = std::make_shared<Striper>(l.channels);
    tune(*striper, l.id, false);
    striper->attach();
    for (auto& ch : l.channels) ch->start(this);
    links_.push_back(Link{std::move(l), std::move(striper)});
  }
  PCCL_LOG_DEBUG(kLog, "{} epoch={}: two-level: {} regions, {} pieces, {} extra links", name_, epoch_,
                 two_level_ ? two_level_->layout.regions() : 0, two_level_ ? two_level_->pieces() : 0, links_.size());
}

int64_t Collectives::rankOfChannel(const void* ch) const {
  auto in = [&](const Channels& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& c) { return c.get() == ch; });
  };
  if (world_ < 2) return -1;
  if (in(successor_)) return (rank_ + 1) % world_;
  if (in(predecessor_)) return (rank_ + world_ - 1) % world_;
  for (const Link& l : links_) {
    if (in(l.peer.channels)) return l.peer.rank;
  }
  return -1;
}

std::string Collectives::rankName(uint32_t rank) const {
  if (world_ >= 2 && rank == (rank_ + world_ - 1) % world_) return predecessor_id_;
  if (world_ >= 2 && rank == (rank_ + 1) % world_) return successor_id_;
  for (const Link& l : links_) {
    if (l.peer.rank == rank) return l.peer.id;
  }
  return fmt::format("group rank {}", rank);
}

std::shared_ptr<Striper> Collectives::striperTo(uint32_t rank) const {
  if (rank == (rank_ + 1) % world_) return striper_;
  if (rank == (rank_ + world_ - 1) % world_) return back_striper_;  // the predecessor's connections, backwards
  for (const Link& l : links_) {
    if (l.peer.rank == rank) return l.striper;
  }
  return nullptr;
}

// Every collective of a two-level group on host buffers (docs/algorithms.md §12-12c), but integer avg
// (its exact partial sums are the flat ring's alone) and a quantized broadcast or all-gather (each
// level would quantize what the one before decoded: not the same bits everywhere). The choice depends
// on the descriptor and the ring, which every member knows alike.
bool Collectives::twoLevel(const ReduceRequest& r) const {
  if (!two_level_ || r.count == 0 || r.device != nullptr) return false;
  switch (r.kind) {
    case wire::Collective::kBroadcast:
    case wire::Collective::kAllGather:
      return r.quant == codec::Quant::kNone;
    case wire::Collective::kAllReduce:
    case wire::Collective::kReduceScatter:
      return !codec::hasPartialSums(r.dtype, r.op);
    default:
      return false;
  }
}

// A region leader sends the region's reduction to R - 1 other leaders (its WAN links carry that much,
// against the flat gather's N - 1 inputs through every member), and a member receives at most N - 1
// full-precision inputs before it makes the call.
bool Collectives::twoLevelGathers(const ReduceRequest& r) const {
  return collective::twoLevelGathers(two_level_->layout.regions(), world_,
                                     codec::wireBytes(r.quant, r.dtype, r.count),
                                     static_cast<uint64_t>(r.count) * codec::dtypeSize(r.dtype), gather_bytes_,
                                     wire::kEagerBytes);
}

Status Collectives::linksTo(const std::vector<uint32_t>& receivers) const {
  for (uint32_t r : receivers) {
    if (striperTo(r) == nullptr) return Status::internal(fmt::format("two-level: no link to group rank {}", r));
  }
  return Status::ok();
}

Status Collectives::startTwoLevel(Op& op, const RingOpSpec& spec) {
  const OpKey key = op.key;
  auto to = [this](uint32_t rank) { return striperTo(rank); };
  auto finished = [this, key](const Status& s) { ringFinished(key, s); };
  if (op.req.kind == wire::Collective::kAllGather || op.req.kind == wire::Collective::kReduceScatter) {
    PCCL_RETURN_IF_ERROR(linksTo(twoLevelPeers(*two_level_, rank_)));
    if (op.req.kind == wire::Collective::kAllGather) {
      op.ring = std::make_shared<TwoLevelAllGather>(spec, *two_level_, to, buffers_, finished);
    } else {
      op.ring = std::make_shared<TwoLevelReduceScatter>(spec, *two_level_, to, buffers_, finished);
    }
    auto ring = op.ring;
    ring->start();
    return Status::ok();
  }
  TwoLevelCall call = twoLevelCall(*two_level_, rank_, op.req.count, codec::dtypeSize(op.req.dtype));
  PCCL_RETURN_IF_ERROR(linksTo(call.receivers()));
  if (op.req.kind == wire::Collective::kBroadcast) {
    op.ring = std::make_shared<TwoLevelBroadcast>(spec, *two_level_, std::move(call), to, buffers_, finished);
  } else {
    op.ring = std::make_shared<TwoLevelAllReduce>(spec, *two_level_, std::move(call), to, buffers_, finished);
  }
  auto ring = op.ring;
  ring->start();
  return Status::ok();
}

Status Collectives::startTwoLevelGather(Op& op, const RingOpSpec& spec) {
  const TwoLevelGatherPlan plan = twoLevelGatherPlan(*two_level_, rank_);
  PCCL_RETURN_IF_ERROR(linksTo(plan.receivers()));
  const OpKey key = op.key;
  op.ring = std::make_shared<TwoLevelGather>(
      spec, plan, [this](uint32_t rank) { return striperTo(rank); }, buffers_,
      [this, key](const Status& s) { ringFinished(key, s); });
  auto ring = op.ring;
  ring->start();
  return Status::ok();
}

void Collectives::helloOthers(const Op& op, const wire::RingCtl& hello) {
  if (!two_level_ || world_ < 2 || !op.ring) return;
  const uint32_t predecessor = (rank_ + world_ - 1) % world_;
  for (uint32_t r : op.ring->helloTo()) {
    if (r == predecessor) continue;  // it has ours already
    if (ctl_hook_ && !ctl_hook_(op.key.tag, hello.kind)) continue;
    if (r == (rank_ + 1) % world_) {
      sendCtlOn(successor_, op.key, hello);
      continue;
    }
    for (const Link& l : links_) {
      if (l.peer.rank == r) sendCtlOn(l.peer.channels, op.key, hello);
    }
  }
}

Status Collectives::onOtherHello(const OpKey& key, uint32_t from, const wire::OpDesc& desc) {
  Op* op = find(key);
  if (op == nullptr || op->state != State::kRunning || !op->ring) return Status::ok();
  if (desc != op->desc) {
    failOp(*op, Status::mismatch(mismatch(desc, rankName(from), op->desc, op->key)),
           FailSpread::kRingAbort | FailSpread::kTellMaster);
    return Status::ok();
  }
  auto ring = op->ring;
  ring->readyFrom(from);
  return Status::ok();
}

}  // namespace pccl::collective
