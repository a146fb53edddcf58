#include "net/resend_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace pccl::net {

void ResendLog::written(Entry e) {
  if (e.number <= acked_) return;  // acknowledged while it was being written again
  kept_bytes_ += e.bytes;
  kept_.push_back(std::move(e));
}

Status ResendLog::acked(uint64_t n) {
  if (n > assigned_) {
    return Status::protocol(fmt::format("acknowledgement of frame {}: only {} were written", n, assigned_));
  }
  if (n <= acked_) return Status::ok();
  acked_ = n;
  while (!kept_.empty() && kept_.front().number <= n) {
    kept_bytes_ -= kept_.front().bytes;
    kept_.pop_front();
  }
  return Status::ok();
}

void ResendLog::retire(uint64_t op_id, uint32_t seq) {
  auto gone = [&](const Entry& e) { return !e.owned && e.op_id == op_id && e.seq == seq; };
  for (const Entry& e : kept_) {
    if (gone(e)) kept_bytes_ -= e.bytes;
  }
  kept_.erase(std::remove_if(kept_.begin(), kept_.end(), gone), kept_.end());
}

Result<std::vector<ResendLog::Entry>> ResendLog::since(uint64_t received) {
  if (received > assigned_ || received < acked_) {
    return Status::protocol(fmt::format("the remote says it took in {} frames: {} were written, {} acknowledged",
                                        received, assigned_, acked_));
  }
  PCCL_RETURN_IF_ERROR(acked(received));
  std::vector<Entry> out(std::make_move_iterator(kept_.begin()), std::make_move_iterator(kept_.end()));
  kept_.clear();
  kept_bytes_ = 0;
  for (Entry& e : out) {
    if (e.owned) continue;
    e.owned = std::make_shared<std::vector<uint8_t>>(e.payload, e.payload + e.bytes);
    e.payload = e.owned->data();
  }
  return out;
}

}  // namespace pccl::net
