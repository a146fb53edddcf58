// One direction of a bottleneck link: a server of `rate` fed by a drop-tail queue of `queue_bytes`, in
// virtual time. Every packet that reaches the link is offered at its arrival time; the link answers
// when it will have left (queued behind what is already there, then serialised at the rate) or that it
// does not fit (the queue holds the bytes waiting and the one being sent; a segment that would take it
// past queue_bytes is dropped). A GSO super-packet is offered as its train of segments arriving together:
// the longest prefix that fits is admitted, the rest dropped, as a real queue would take segment by segment.
// The Link holds no packets: the router keeps them until their release time. Not thread-safe: the router
// guards its links with one mutex.
#ifndef PCCL_WANEM_LINK_HPP_
#define PCCL_WANEM_LINK_HPP_

#include <algorithm>
#include <cstdint>
#include <limits>

#include "packet.hpp"

namespace pccl::wanem {

struct LinkParams {
  double rate_mbit = 0;     // 0 = no limit (the link adds nothing)
  uint64_t queue_bytes = 0; // drop-tail limit; with a rate, at least one segment must fit
};

struct LinkStats {
  uint64_t segments = 0, bytes = 0;  // admitted
  uint64_t dropped = 0;              // segments dropped at the tail (the queue was full): part of the model
  double max_queue_delay_ns = 0;     // the longest wait behind other packets
  double min_drop_backlog = std::numeric_limits<double>::infinity();  // backlog (bytes) at the emptiest drop
};

class Link {
 public:
  Link() = default;
  explicit Link(LinkParams p) : p_(p), ns_per_byte_(p.rate_mbit > 0 ? 8000.0 / p.rate_mbit : 0) {}

  bool limited() const { return ns_per_byte_ > 0; }
  const LinkParams& params() const { return p_; }
  const LinkStats& stats() const { return s_; }

  // Offers the segments of `pkt` arriving at t_ns. Returns how many (a prefix) were admitted and sets
  // *depart_ns to when the last admitted one has left; 0 admitted leaves *depart_ns alone.
  uint32_t offer(int64_t t_ns, const PacketInfo& pkt, int64_t* depart_ns) {
    if (!limited()) {
      *depart_ns = t_ns;
      s_.segments += pkt.segments;
      s_.bytes += pkt.wire_bytes;
      return pkt.segments;
    }
    const double t = static_cast<double>(t_ns);
    busy_ns_ = std::max(busy_ns_, t);
    const double wait = busy_ns_ - t;
    uint32_t admitted = 0;
    for (; admitted < pkt.segments; ++admitted) {
      const double size = pkt.segmentWireBytes(admitted);
      const double backlog = (busy_ns_ - t) / ns_per_byte_;
      if (backlog + size > static_cast<double>(p_.queue_bytes) + 1e-6) {
        s_.min_drop_backlog = std::min(s_.min_drop_backlog, backlog);
        break;
      }
      busy_ns_ += size * ns_per_byte_;
      s_.bytes += static_cast<uint64_t>(size);
    }
    if (admitted > 0) s_.max_queue_delay_ns = std::max(s_.max_queue_delay_ns, wait);
    s_.segments += admitted;
    s_.dropped += pkt.segments - admitted;
    if (admitted > 0) *depart_ns = static_cast<int64_t>(busy_ns_ + 0.5);
    return admitted;
  }

 private:
  LinkParams p_;
  double ns_per_byte_ = 0;
  double busy_ns_ = 0;  // when the link has sent everything admitted so far
  LinkStats s_;
};

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_LINK_HPP_
