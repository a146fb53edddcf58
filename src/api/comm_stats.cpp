#include "api/comm_stats.hpp"

#include <fmt/format.h>

#include "pccl/communicator.hpp"
#include "util/log.hpp"

namespace pccl {
namespace {
constexpr const char* kLog = "peer";
}  // namespace

std::string formatPeerId(const PeerId& id) {
  std::string s;
  for (uint8_t b : id) s += fmt::format("{:02x}", b);
  return s;
}

void StatsRecorder::setPeer(std::string short_id) {
  std::lock_guard<std::mutex> lk(mu_);
  peer_ = std::move(short_id);
}

void StatsRecorder::reduceStarted(uint64_t tag) {
  std::lock_guard<std::mutex> lk(mu_);
  if (aborted_tags_.erase(tag) != 0) ++s_.allreduce_retries;
}

void StatsRecorder::reduceEnded(uint64_t tag, const Status& status, uint64_t tx, uint64_t rx, double seconds,
                                uint64_t data_bytes) {
  std::unique_lock<std::mutex> lk(mu_);
  s_.tx_bytes += tx;
  s_.rx_bytes += rx;
  const uint64_t epoch = s_.epoch;
  const std::string peer = peer_;
  if (!status.isOk()) {
    ++s_.allreduce_aborts;
    if (aborted_tags_.size() < kMaxRememberedTags) aborted_tags_.insert(tag);
    lk.unlock();  // log outside the lock: stats() readers never wait on stderr
    PCCL_LOG_INFO(kLog, "peer={} epoch={} tag={}: all-reduce aborted after {:.3f} s: {}", peer, epoch, tag, seconds,
                  status.toString());
    return;
  }
  ++s_.allreduce_ops;
  s_.last_allreduce_seconds = seconds;
  s_.last_allreduce_bytes_per_second = seconds > 0 ? static_cast<double>(data_bytes) / seconds : 0.0;
  const double rate = s_.last_allreduce_bytes_per_second;
  lk.unlock();
  PCCL_LOG_DEBUG(kLog, "peer={} epoch={} tag={}: all-reduce done: {} bytes in {:.3f} ms ({:.1f} MB/s), sent {} received {}",
                 peer, epoch, tag, data_bytes, seconds * 1e3, rate / 1e6, tx, rx);
}

void StatsRecorder::syncEnded(const Status& status, uint64_t tx, uint64_t rx) {
  std::unique_lock<std::mutex> lk(mu_);
  s_.tx_bytes += tx;
  s_.rx_bytes += rx;
  const uint64_t epoch = s_.epoch;
  const std::string peer = peer_;
  if (status.isOk()) {
    ++s_.sync_ops;
    lk.unlock();
    PCCL_LOG_DEBUG(kLog, "peer={} epoch={}: shared-state sync done: sent {} received {}", peer, epoch, tx, rx);
  } else if (status.code() != Code::kInvalidArgument && status.code() != Code::kInvalidUsage) {
    // Bad arguments and calls at the wrong time are the caller's to fix, not aborts to retry.
    ++s_.sync_aborts;
    lk.unlock();
    PCCL_LOG_INFO(kLog, "peer={} epoch={}: shared-state sync failed: {}", peer, epoch, status.toString());
  }
}

void StatsRecorder::ringInstalled(uint64_t epoch) {
  std::lock_guard<std::mutex> lk(mu_);
  ++s_.topology_updates;
  s_.epoch = epoch;
}

void StatsRecorder::sameHostRead(uint64_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  s_.same_host_read_bytes += bytes;
}

void StatsRecorder::masterLost() {
  std::lock_guard<std::mutex> lk(mu_);
  ++s_.master_losses;
}

void StatsRecorder::masterBack(uint64_t away_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  ++s_.master_returns;
  s_.master_away_ms += away_ms;
}

void StatsRecorder::ringResumed(uint64_t resent_bytes, uint64_t stalled_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  ++s_.ring_reconnects;
  s_.ring_resent_bytes += resent_bytes;
  s_.ring_stalled_ms += stalled_ms;
}

void StatsRecorder::connectionsTuned(uint32_t active, bool changed) {
  std::lock_guard<std::mutex> lk(mu_);
  s_.ring_active_connections = active;
  if (changed) ++s_.ring_connection_changes;
}

CommStats StatsRecorder::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return s_;
}

}  // namespace pccl
