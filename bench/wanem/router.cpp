#include "router.hpp"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pccl::wanem {

namespace {
// struct virtio_net_hdr from <linux/virtio_net.h> (that header does not compile as C++): what the TUN
// device puts before every packet with IFF_VNET_HDR. Host byte order.
struct VnetHdr {
  uint8_t flags;
  uint8_t gso_type;  // 0 = not a GSO packet
  uint16_t hdr_len;
  uint16_t gso_size;  // payload bytes per segment
  uint16_t csum_start;
  uint16_t csum_offset;
};
using virtio_net_hdr = VnetHdr;
constexpr uint8_t VIRTIO_NET_HDR_GSO_NONE = 0;
constexpr size_t kMaxPacket = 65536 + sizeof(virtio_net_hdr);
constexpr size_t kMaxQueuedBytes = 512u << 20;  // far above any BDP we emulate
constexpr size_t kHistBuckets = 10000;          // 10 µs each
using Clock = std::chrono::steady_clock;

uint32_t be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) | (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

void realtime(std::thread& t, int prio) {
  sched_param sp{};
  sp.sched_priority = prio;
  pthread_setschedparam(t.native_handle(), SCHED_FIFO, &sp);  // best effort: fine if refused
}
}  // namespace

Router::Router(std::vector<int> tun_fds, std::vector<uint32_t> rank_addrs, std::vector<std::vector<PathModel>> paths,
               uint64_t seed)
    : addrs_(std::move(rank_addrs)), paths_(std::move(paths)) {
  for (int fd : tun_fds) {
    auto lane = std::make_unique<Lane>();
    lane->fd = fd;
    lane->rng.seed(seed + lanes_.size());
    lane->last_release.assign(addrs_.size(), std::vector<Clock::time_point>(addrs_.size()));
    lane->late_hist.assign(kHistBuckets + 1, 0);
    lanes_.push_back(std::move(lane));
  }
}

Router::~Router() { stop(); }

void Router::start() {
  for (auto& l : lanes_) {
    Lane& lane = *l;
    lane.reader = std::thread([this, &lane] { readLoop(lane); });
    lane.writer = std::thread([this, &lane] { writeLoop(lane); });
    realtime(lane.reader, 10);
    realtime(lane.writer, 20);
  }
}

void Router::stop() {
  if (stop_.exchange(true)) return;
  for (auto& l : lanes_) {
    l->cv.notify_all();
    if (l->reader.joinable()) l->reader.join();
    if (l->writer.joinable()) l->writer.join();
  }
}

int Router::rankOf(uint32_t addr) const {
  for (size_t i = 0; i < addrs_.size(); ++i) {
    if (addrs_[i] == addr) return static_cast<int>(i);
  }
  return -1;
}

void Router::readLoop(Lane& lane) {
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  while (!stop_) {
    pollfd p{lane.fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    std::vector<uint8_t> buf;
    {
      std::lock_guard<std::mutex> lk(lane.mu);
      if (!lane.spare.empty()) {
        buf = std::move(lane.spare.back());
        lane.spare.pop_back();
      }
    }
    buf.resize(kMaxPacket);
    const ssize_t n = ::read(lane.fd, buf.data(), buf.size());
    if (n <= static_cast<ssize_t>(sizeof(virtio_net_hdr) + 20)) continue;
    buf.resize(static_cast<size_t>(n));
    virtio_net_hdr vh;
    std::memcpy(&vh, buf.data(), sizeof vh);
    const uint8_t* ip = buf.data() + sizeof vh;
    const size_t ip_len = static_cast<size_t>(n) - sizeof vh;
    // Segments this (possibly GSO) packet stands for, for the loss model and the statistics.
    const uint64_t segs = vh.gso_type != VIRTIO_NET_HDR_GSO_NONE && vh.gso_size > 0
                              ? std::max<uint64_t>(1, (ip_len + vh.gso_size - 1) / vh.gso_size)
                              : 1;
    const bool v4 = (ip[0] >> 4) == 4;
    const int src = v4 ? rankOf(be32(ip + 12)) : -1;
    const int dst = v4 ? rankOf(be32(ip + 16)) : -1;
    Clock::time_point release = Clock::now();
    if (src >= 0 && dst >= 0) {
      const PathModel& m = paths_[src][dst];
      // The whole super-packet is lost with the probability that any of its segments is: the same
      // number of loss events per byte as per-segment loss, each a short burst.
      const double p_loss = 1.0 - std::pow(1.0 - m.loss, static_cast<double>(segs));
      if (m.loss > 0 && uni(lane.rng) < p_loss) {
        std::lock_guard<std::mutex> lk(lane.mu);
        lane.stats.lost_random += segs;
        lane.stats.packets += 1;
        lane.spare.push_back(std::move(buf));
        continue;
      }
      const double d = m.delay_ms + (m.jitter_ms > 0 ? uni(lane.rng) * m.jitter_ms : 0.0);
      release += std::chrono::microseconds(static_cast<int64_t>(d * 1000));
      auto& last = lane.last_release[src][dst];
      release = std::max(release, last);  // jitter never reorders a path
      last = release;
    }
    std::lock_guard<std::mutex> lk(lane.mu);
    lane.stats.packets += 1;
    lane.stats.segments += segs;
    lane.stats.bytes += ip_len;
    if (src < 0 || dst < 0) lane.stats.unknown += 1;
    if (lane.queued_bytes + buf.size() > kMaxQueuedBytes) {
      lane.stats.dropped_overflow += 1;
      continue;
    }
    lane.queued_bytes += buf.size();
    const bool earliest = lane.queue.empty() || release < lane.queue.top().release;
    lane.queue.push(Packet{release, std::move(buf)});
    if (earliest) lane.cv.notify_one();
  }
}

void Router::writeLoop(Lane& lane) {
  std::unique_lock<std::mutex> lk(lane.mu);
  while (!stop_) {
    if (lane.queue.empty()) {
      lane.cv.wait_for(lk, std::chrono::milliseconds(100));
      continue;
    }
    const Clock::time_point due = lane.queue.top().release;
    if (Clock::now() < due) {
      lane.cv.wait_until(lk, due);
      continue;
    }
    Packet p = std::move(const_cast<Packet&>(lane.queue.top()));
    lane.queue.pop();
    lane.queued_bytes -= p.data.size();
    lk.unlock();
    const auto now = Clock::now();
    (void)!::write(lane.fd, p.data.data(), p.data.size());
    const int64_t late_us = std::chrono::duration_cast<std::chrono::microseconds>(now - p.release).count();
    lk.lock();
    lane.late_hist[std::min<size_t>(kHistBuckets, static_cast<size_t>(std::max<int64_t>(0, late_us) / 10))] += 1;
    lane.stats.late_max_us = std::max(lane.stats.late_max_us, static_cast<double>(late_us));
    if (lane.spare.size() < 4096) lane.spare.push_back(std::move(p.data));
  }
}

RouterStats Router::stats() const {
  RouterStats s;
  std::vector<uint64_t> hist(kHistBuckets + 1, 0);
  for (const auto& l : lanes_) {
    std::lock_guard<std::mutex> lk(l->mu);
    s.packets += l->stats.packets;
    s.segments += l->stats.segments;
    s.bytes += l->stats.bytes;
    s.lost_random += l->stats.lost_random;
    s.dropped_overflow += l->stats.dropped_overflow;
    s.unknown += l->stats.unknown;
    s.late_max_us = std::max(s.late_max_us, l->stats.late_max_us);
    for (size_t i = 0; i < hist.size(); ++i) hist[i] += l->late_hist[i];
  }
  uint64_t total = 0;
  for (uint64_t c : hist) total += c;
  uint64_t seen = 0;
  bool have50 = false;
  for (size_t i = 0; i < hist.size(); ++i) {
    seen += hist[i];
    if (!have50 && seen * 2 >= total) {
      s.late_p50_us = static_cast<double>(i) * 10;
      have50 = true;
    }
    if (seen * 100 >= total * 99) {
      s.late_p99_us = static_cast<double>(i) * 10;
      break;
    }
  }
  return s;
}

}  // namespace pccl::wanem
