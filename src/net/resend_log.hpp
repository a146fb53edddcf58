// The sending side of a resumable ring connection (docs/protocol.md §5.4.3): the frames written and not
// yet acknowledged, so that when the connection breaks and a new one replaces it, exactly the frames the
// receiver did not take in are written again.
//
// The sender numbers the frames it writes 1, 2, 3... (lending's and the resume layer's own frames are not
// numbered); the receiver counts the frames it has taken in and now and then acknowledges the count
// (kDataAck). A frame is kept from the moment it is written in full until it is acknowledged: by
// pointer when its operation keeps the payload unchanged (until the operation ends here: retire()), or
// owned (control frames). Keeping costs a few words per frame; nothing is copied unless a connection
// breaks, and then only what the receiver lacks.
// Thread: the owning DataChannel's.
#ifndef PCCL_NET_RESEND_LOG_HPP_
#define PCCL_NET_RESEND_LOG_HPP_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "pccl/status.hpp"
#include "wire/data.hpp"
#include "wire/frame.hpp"

namespace pccl::net {

class ResendLog {
 public:
  using Head = std::array<uint8_t, wire::kHeaderSize + wire::kDataHeaderSize>;
  struct Entry {
    uint64_t number = 0;
    Head head{};
    const uint8_t* payload = nullptr;  // owned->data() when owned
    uint32_t bytes = 0;
    uint64_t op_id = 0;
    uint32_t seq = 0;
    std::shared_ptr<std::vector<uint8_t>> owned;
  };

  // The number of the next frame to be written (1, 2, ...).
  uint64_t assign() { return ++assigned_; }
  uint64_t assigned() const { return assigned_; }
  // Frame `e.number` was written in full: kept until acknowledged (or retired).
  void written(Entry e);
  // The receiver has taken in every frame up to `n`: they are forgotten. An error when `n` is a frame
  // not written yet; a count below an earlier one changes nothing.
  Status acked(uint64_t n);
  uint64_t ackedUpTo() const { return acked_; }
  // The operation (op_id, seq) has ended here: its frames whose payload it owns are forgotten (the
  // receiver holds them if it committed; if it failed, nobody needs them).
  void retire(uint64_t op_id, uint32_t seq);
  // After a break: the kept frames the receiver lacks (numbered above `received`, its count), in
  // order, each now owning a copy of its payload (the caller may end the operation meanwhile). An error
  // when `received` is not a count this sender could have (above what was written, or below what was
  // acknowledged).
  Result<std::vector<Entry>> since(uint64_t received);
  size_t size() const { return kept_.size(); }
  uint64_t keptBytes() const { return kept_bytes_; }

 private:
  std::deque<Entry> kept_;  // ascending numbers
  uint64_t assigned_ = 0;
  uint64_t acked_ = 0;
  uint64_t kept_bytes_ = 0;
};

}  // namespace pccl::net

#endif  // PCCL_NET_RESEND_LOG_HPP_
