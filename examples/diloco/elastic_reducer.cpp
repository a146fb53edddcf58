#include "elastic_reducer.hpp"

#include <chrono>
#include <cstdio>
#include <thread>

namespace diloco {
namespace {

constexpr uint32_t kMaxAttempts = 20;

bool isRecoverable(pccl::Code code) {
  return code == pccl::Code::kPeerLost || code == pccl::Code::kTopologyChanged || code == pccl::Code::kTimeout;
}

}  // namespace

pccl::Result<std::unique_ptr<ElasticReducer>> ElasticReducer::connect(const std::string& master, uint32_t worker,
                                                                      pccl::SharedState* state, bool late_join) {
  pccl::CommConfig config;
  config.master_address = master;
  config.listen_address = "127.0.0.1:0";
  config.peer_timeout_ms = 5000;  // a killed worker's sockets break at once; a frozen one is dropped after this
  auto comm = pccl::Communicator::create(config);
  if (!comm.isOk()) return comm.status();
  std::unique_ptr<ElasticReducer> r(new ElasticReducer(std::move(*comm), worker, state, late_join));
  pccl::Status joined = r->comm_->connect();
  if (joined.code() == pccl::Code::kPeerLost) {
    // Admitted, but someone died during the ring build: the members retry updateTopology, so do we.
    std::printf("worker=%u connect: %s; updating the topology\n", worker, joined.toString().c_str());
    std::fflush(stdout);
    joined = r->updateTopology();
  }
  PCCL_RETURN_IF_ERROR(joined);
  // The members that admitted us sync right after their updateTopology: meet them there.
  PCCL_RETURN_IF_ERROR(r->syncIfEpochChanged());
  return r;
}

pccl::Status ElasticReducer::updateTopology() {
  for (uint32_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
    pccl::Status s = comm_->updateTopology();
    if (s.isOk()) {
      std::printf("worker=%u topology epoch=%llu world=%u\n", worker_,
                  static_cast<unsigned long long>(comm_->topology().epoch), comm_->topology().world_size);
      std::fflush(stdout);
      return s;
    }
    if (!isRecoverable(s.code())) return s;
    std::printf("worker=%u updateTopology failed (%s), retrying\n", worker_, s.toString().c_str());
    std::fflush(stdout);
  }
  return pccl::Status::timeout("updateTopology kept failing");
}

pccl::Status ElasticReducer::syncMembership() {
  auto pending = comm_->arePeersPending();
  if (!pending.isOk()) return pending.status();
  return *pending ? reform() : pccl::Status::ok();
}

pccl::Status ElasticReducer::waitForWorld(uint32_t world, uint32_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (worldSize() < world) {
    if (std::chrono::steady_clock::now() > deadline) {
      return pccl::Status::timeout("only " + std::to_string(worldSize()) + " of " + std::to_string(world) +
                                   " workers joined");
    }
    PCCL_RETURN_IF_ERROR(syncMembership());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pccl::Status::ok();
}

pccl::Result<ReduceStats> ElasticReducer::allReduceAvg(float* data, size_t count, pccl::Quant quant) {
  pccl::ReduceOptions options;
  options.quant = quant;
  ReduceStats stats;
  for (uint32_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto info = comm_->allReduce(data, data, count, pccl::DataType::kFloat32, pccl::RedOp::kAvg, options);
    if (info.isOk()) {
      stats.tx_bytes += info->tx_bytes;
      stats.world_size = info->world_size;
      stats.seconds += info->seconds;
      return stats;
    }
    if (!isRecoverable(info.status().code())) return info.status();
    ++stats.retries;  // `data` still holds our input: pccl restores an in-place buffer on failure
    std::printf("worker=%u all-reduce failed (%s): updating the topology and retrying\n", worker_,
                info.status().toString().c_str());
    std::fflush(stdout);
    // The new ring may hold a joiner, which syncs as soon as its connect() returns: sync first (the
    // rule in the header), then retry with the same pseudo-gradient (our theta did not change unless
    // this worker was out of date; the trainer checks syncTotals()).
    PCCL_RETURN_IF_ERROR(reform());
  }
  return pccl::Status::timeout("all-reduce kept failing");
}

PendingReduce ElasticReducer::startAllReduceAvg(float* data, size_t count, pccl::Quant quant) {
  pccl::ReduceOptions options;
  options.quant = quant;
  PendingReduce pending;
  auto handle = comm_->allReduceAsync(data, data, count, pccl::DataType::kFloat32, pccl::RedOp::kAvg, options);
  if (handle.isOk()) {
    pending.handle = *handle;
  } else {
    pending.start = handle.status();
  }
  return pending;
}

pccl::Result<ReduceStats> ElasticReducer::finishAllReduceAvg(const PendingReduce& pending, float* data,
                                                               size_t count, pccl::Quant quant) {
  pccl::Status failed = pending.start;
  if (failed.isOk()) {
    auto info = pending.handle.wait();
    if (info.isOk()) {
      ReduceStats stats;
      stats.tx_bytes = info->tx_bytes;
      stats.world_size = info->world_size;
      stats.seconds = info->seconds;
      return stats;
    }
    failed = info.status();
  }
  if (!isRecoverable(failed.code())) return failed;
  std::printf("worker=%u background all-reduce failed (%s): updating the topology and retrying\n", worker_,
              failed.toString().c_str());
  std::fflush(stdout);
  PCCL_RETURN_IF_ERROR(reform());  // `data` holds its input again: pccl restores an in-place buffer
  auto retried = allReduceAvg(data, count, quant);
  if (retried.isOk()) retried->retries += 1;
  return retried;
}

pccl::Status ElasticReducer::syncIfEpochChanged() {
  if (state_ == nullptr || (synced_ && synced_epoch_ == epoch())) return pccl::Status::ok();
  return syncState().status();
}

pccl::Result<pccl::SyncInfo> ElasticReducer::syncState() {
  if (state_ == nullptr) return pccl::Status::invalidUsage("no shared state registered");
  for (uint32_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
    // A late joiner has nothing worth offering until its first sync: receive-only, unless it is alone
    // in its group (then nobody else could offer anything and the sync keeps its own state).
    const bool receive_only = late_join_ && !synced_ && comm_->topology().group_world_size > 1;
    const auto strategy = receive_only ? pccl::SyncStrategy::kReceiveOnly : pccl::SyncStrategy::kEnforcePopular;
    auto info = comm_->syncSharedState(*state_, strategy);
    if (info.isOk()) {
      synced_ = true;
      synced_epoch_ = epoch();
      totals_.syncs += 1;
      totals_.state_changes += info->keys_received > 0 ? 1 : 0;
      totals_.tx_bytes += info->tx_bytes;
      totals_.rx_bytes += info->rx_bytes;
      std::printf("worker=%u sync revision=%llu rx_bytes=%llu tx_bytes=%llu keys=%u epoch=%llu world=%u "
                  "strategy=%s seconds=%.3f\n",
                  worker_, static_cast<unsigned long long>(info->revision),
                  static_cast<unsigned long long>(info->rx_bytes), static_cast<unsigned long long>(info->tx_bytes),
                  info->keys_received, static_cast<unsigned long long>(synced_epoch_),
                  comm_->topology().group_world_size, receive_only ? "receive-only" : "enforce-popular",
                  info->seconds);
      std::fflush(stdout);
      return info;
    }
    // A key set, dtype or count that differs from the group's is kInvalidArgument (only this peer gets
    // it; the others go on): not recoverable, so it ends here like every other non-retryable error.
    if (!isRecoverable(info.status().code())) return info.status();
    std::printf("worker=%u sync failed (%s): updating the topology and retrying\n", worker_,
                info.status().toString().c_str());
    std::fflush(stdout);
    PCCL_RETURN_IF_ERROR(updateTopology());  // the epoch changed: the next attempt is the sync after it
  }
  return pccl::Status::timeout("shared-state sync kept failing");
}

bool parseQuant(const std::string& name, pccl::Quant& quant) {
  if (name == "none") quant = pccl::Quant::kNone;
  else if (name == "fp16") quant = pccl::Quant::kFp16;
  else if (name == "bf16") quant = pccl::Quant::kBf16;
  else if (name == "int8") quant = pccl::Quant::kInt8;
  else if (name == "fp4") quant = pccl::Quant::kFp4;
  else return false;
  return true;
}

}  // namespace diloco
