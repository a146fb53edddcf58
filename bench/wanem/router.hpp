// The user-space half of the WAN: every packet between rank namespaces is routed into a TUN device,
// read here, held for its path's one-way delay (plus jitter), dropped at random with the path's loss
// rate, and written back into the TUN at its release time. Reading uses IFF_VNET_HDR, so the kernel
// hands over whole GSO super-packets (far fewer packets to move than MTU-sized ones).
// The TUN is multi-queue: each queue (one per core) has its own reader, delay queue and writer, so
// the costly writes back into the kernel run on both cores; the kernel keeps a flow on one queue, so a
// TCP flow is never reordered. Threads: a reader and a writer (SCHED_FIFO when allowed) per queue.
#ifndef PCCL_WANEM_ROUTER_HPP_
#define PCCL_WANEM_ROUTER_HPP_

#include <array>
#include <memory>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pccl::wanem {

struct PathModel {
  double delay_ms = 0;   // one way
  double jitter_ms = 0;  // uniform in [0, jitter]; per-path release order is kept (no reordering)
  double loss = 0;       // probability per MTU-sized segment
};

struct RouterStats {
  uint64_t packets = 0, segments = 0, bytes = 0;
  uint64_t lost_random = 0;      // segments dropped on purpose (loss model)
  uint64_t dropped_overflow = 0; // packets dropped because the delay queue was full: the run is not faithful
  uint64_t unknown = 0;          // packets not between two ranks, passed on at once
  double late_p50_us = 0, late_p99_us = 0, late_max_us = 0;  // release lateness
};

class Router {
 public:
  // `rank_of(ipv4 host-order address)` gives a rank or -1; paths[src][dst] the model of that path.
  Router(std::vector<int> tun_fds, std::vector<uint32_t> rank_addrs, std::vector<std::vector<PathModel>> paths,
         uint64_t seed);
  ~Router();
  void start();
  void stop();
  RouterStats stats() const;

 private:
  struct Packet {
    std::chrono::steady_clock::time_point release;
    std::vector<uint8_t> data;  // virtio_net_hdr + IP packet
    bool operator>(const Packet& o) const { return release > o.release; }
  };
  // One TUN queue and everything that serves it.
  struct Lane {
    int fd = -1;
    std::mt19937_64 rng;
    std::vector<std::vector<std::chrono::steady_clock::time_point>> last_release;  // per path
    std::thread reader, writer;
    std::mutex mu;
    std::condition_variable cv;
    std::priority_queue<Packet, std::vector<Packet>, std::greater<Packet>> queue;
    size_t queued_bytes = 0;
    std::vector<std::vector<uint8_t>> spare;  // recycled packet buffers
    RouterStats stats;
    std::vector<uint32_t> late_hist;  // 10 µs buckets up to 100 ms
  };
  void readLoop(Lane& lane);
  void writeLoop(Lane& lane);
  int rankOf(uint32_t addr) const;

  std::vector<uint32_t> addrs_;
  std::vector<std::vector<PathModel>> paths_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_ROUTER_HPP_
