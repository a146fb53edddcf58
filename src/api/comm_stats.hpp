// The counters behind Communicator::stats() / pcclGetStats, and the one-line events of a peer's
// collectives (peer, epoch, tag) in the log.
#ifndef PCCL_API_COMM_STATS_HPP_
#define PCCL_API_COMM_STATS_HPP_

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

#include "pccl/status.hpp"
#include "pccl/types.hpp"

namespace pccl {

// Thread-safe: user threads and the io thread report to it; stats() may be read at any time.
class StatsRecorder {
 public:
  void setPeer(std::string short_id);
  // An all-reduce passed its argument checks and was handed to the io thread.
  void reduceStarted(uint64_t tag);
  // It ended. `data_bytes` = count x element size.
  void reduceEnded(uint64_t tag, const Status& status, uint64_t tx, uint64_t rx, double seconds, uint64_t data_bytes);
  // A shared-state sync ended (with its bytes on the wire when it succeeded).
  void syncEnded(const Status& status, uint64_t tx, uint64_t rx);
  void ringInstalled(uint64_t epoch);
  // Ring payload read from a same-host neighbour's memory (CommConfig::same_host_reads).
  void sameHostRead(uint64_t bytes);
  void masterLost();
  void masterBack(uint64_t away_ms);
  // A ring connection was resumed on a new one (net/data_channel.hpp).
  void ringResumed(uint64_t resent_bytes, uint64_t stalled_ms);
  // A link chose how many connections carry data (`changed`), or a ring was installed: the count to the successor.
  void connectionsTuned(uint32_t active, bool changed);
  CommStats stats() const;

 private:
  // Tags whose last attempt was aborted; bounded so a run of ever-new failing tags cannot grow it.
  static constexpr size_t kMaxRememberedTags = 65536;
  mutable std::mutex mu_;
  std::string peer_ = "?";
  CommStats s_;
  std::unordered_set<uint64_t> aborted_tags_;
};

}  // namespace pccl

#endif  // PCCL_API_COMM_STATS_HPP_
