// Communicator::Impl, collectives: the checks and bookkeeping of every collective and of syncSharedState
// on the calling thread, and the hand-off of an all-reduce to the io thread (collective::Collectives),
// whose completion comes back through the ReduceHandle.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "api/comm_impl.hpp"
#include "api/reduce_handle.hpp"
#include "codec/dtype.hpp"

namespace pccl {

using peer::PeerState;

Result<ReduceHandle> Communicator::Impl::startCollective(const CollectiveCall& call) {
  PCCL_RETURN_IF_ERROR(record(checkCallOptions(call)));
  const char* name = wire::collectiveName(call.kind);
  const ReduceOptions& o = call.options;
  collective::ReduceRequest req;
  req.submitted = Clock::now();
  req.kind = call.kind;
  req.root = call.root;
  req.tag = o.tag;
  req.dtype = static_cast<codec::DType>(call.dtype);
  // Only the reducing collectives have an operator: the others carry sum, so that every peer agrees.
  const bool reduces = call.kind == wire::Collective::kAllReduce || call.kind == wire::Collective::kReduceScatter;
  req.op = reduces ? static_cast<codec::RedOp>(call.op) : codec::RedOp::kSum;
  req.quant = static_cast<codec::Quant>(o.quant);
  req.compress = o.compress;
  req.segment_bytes = config_.segment_bytes;
  req.timeout = Millis(config_.op_timeout_ms);
  req.output = static_cast<uint8_t*>(call.recv);
  req.input = static_cast<const uint8_t*>(call.send);
  CallLayout layout;
  bool non_root = false;  // a broadcast's receiver: its send buffer is not read
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!fatal_.isOk()) return record(fatal_);
    if (state_ != PeerState::kMember) {
      return record(Status::invalidUsage(fmt::format("{} needs a connected member with a ring; this peer is {}", name,
                                                     peer::peerStateName(state_))));
    }
    if (syncing_) return record(Status::invalidUsage(fmt::format("{} while a shared-state sync runs on this peer", name)));
    const uint32_t world = std::max<uint32_t>(topology_.group_world_size, 1);
    auto checked = checkCallBuffers(call, topology_.group_rank, world);
    if (!checked.isOk()) return record(checked.status());
    layout = *checked;
    non_root = call.kind == wire::Collective::kBroadcast && call.root != topology_.group_rank;
    if (inflight_.size() >= config_.max_concurrent_ops) {
      return record(Status::invalidUsage(fmt::format(
          "{} collectives are in flight on this peer, its limit (max_concurrent_ops): wait for one first",
          inflight_.size())));
    }
    if (inflight_.count(o.tag) != 0) {
      return record(Status::invalidUsage(fmt::format(
          "tag {} is still in flight on this peer: concurrent collectives need distinct tags", o.tag)));
    }
    inflight_.insert(o.tag);
  }
  req.count = layout.layout_count;
  if (non_root) req.input = req.output;
  if (o.location == BufferLocation::kDevice && layout.layout_count > 0) {
    Status st = device_.prepare(layout, req);
    if (!st.isOk()) {
      std::lock_guard<std::mutex> lk(mu_);
      inflight_.erase(o.tag);
      return record(st);
    }
  } else if (layout.in_place) {
    // The ring reads a saved copy of the input (a broadcast's non-root: of its buffer), so a failure can
    // put it back.
    const size_t copy = layout.input_bytes > 0 ? layout.input_bytes : layout.output_bytes;
    req.saved = buffers_.acquire(copy);
    std::memcpy(req.saved.data.get(), req.input, copy);
    req.input = req.saved.data.get();
    req.restore_to = layout.restore_to;
    req.restore_from = layout.restore_from;
    req.restore_bytes = layout.restore_bytes;
  }
  auto state = std::make_shared<ReduceHandle::State>();
  const uint64_t tag = o.tag;
  const size_t bytes = layout.output_bytes;
  stats_.reduceStarted(tag);
  auto done = [this, state, tag, bytes](const collective::ReduceOutcome& out) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      inflight_.erase(tag);
    }
    stats_.reduceEnded(tag, out.status, out.tx_bytes, out.rx_bytes, out.seconds, bytes);
    if (!out.status.isOk()) (void)record(out.status);
    std::lock_guard<std::mutex> lk(state->mu);
    state->done = true;
    state->status = out.status;
    state->info = ReduceInfo{out.tx_bytes, out.rx_bytes, out.world_size, out.seconds, out.gathered, out.hierarchical};
    state->cv.notify_all();
  };
  auto shared_req = std::make_shared<collective::ReduceRequest>(std::move(req));
  asio::post(io_, [this, shared_req, done] { colls_->submit(std::move(*shared_req), done); });
  return ReduceHandle(state);
}

Result<SyncInfo> Communicator::Impl::syncSharedState(SharedState& state, SyncStrategy strategy) {
  SyncContext ctx;
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (away_ && fatal_.isOk()) {
      // The master is on its way back (a broken connection, a restart): the sync waits for it, within
      // the call's timeout, instead of failing while the group's other members wait for this one.
      const Status back = waitMaster(lk, Clock::now() + Millis(config_.op_timeout_ms));
      if (!back.isOk() && fatal_.isOk()) {
        return record(Status::topologyChanged(fmt::format(
            "syncSharedState needs the master, which has been away for {} ms ({}); call pcclUpdateTopology (it "
            "waits for the master) and sync again",
            msSince(away_since_), away_why_.message())));
      }
    }
    if (!fatal_.isOk()) return record(fatal_);
    if (state_ != PeerState::kMember) {
      return record(Status::invalidUsage(fmt::format(
          "syncSharedState needs a connected member with a ring; this peer is {}", peer::peerStateName(state_))));
    }
    if (!inflight_.empty() || syncing_) {
      return record(Status::invalidUsage(fmt::format(
          "syncSharedState while {} collective(s){} are in flight on this peer: wait for them first",
          inflight_.size(), syncing_ ? " and another sync" : "")));
    }
    syncing_ = true;
    ctx.epoch = topology_.epoch;
    ctx.self = id_;
    ctx.ring = topology_.ring;
  }
  // A sync is not tuned: a tuned communicator's sources open at most kSyncConnections each.
  ctx.connections = tunedConnections(config_) ? std::min(linkConnections(config_), kSyncConnections)
                                              : config_.connections_per_peer;
  ctx.same_host_connections = config_.same_host_connections;
  ctx.timeout = Millis(config_.op_timeout_ms);
  ctx.handshake_timeout = Millis(config_.handshake_timeout_ms);
  ctx.redial_window = Millis(config_.peer_timeout_ms);
  auto r = sync_->run(state, strategy, ctx);
  stats_.syncEnded(r.status(), r.isOk() ? r->tx_bytes : 0, r.isOk() ? r->rx_bytes : 0);
  std::lock_guard<std::mutex> lk(mu_);
  syncing_ = false;
  return record(std::move(r));
}

}  // namespace pccl
