// The user-space half of the WAN. Every packet a rank sends to another leaves through its TUN interface
// and is read here; it then crosses the emulated network in virtual time:
//   sender's uplink (rate, drop-tail queue) -> path (random loss per segment; optionally a bottleneck
//   of its own) -> one-way delay (+ jitter, never reordering the path) -> receiver's downlink (rate,
//   drop-tail queue)
// and is written into the receiving rank's TUN when it leaves the receiver's downlink. The bottlenecks are remote queues shared by all flows through them, as on the
// internet: parallel flows compete there and lose segments when the queue is full. Links are computed,
// not simulated packet by packet: each Link knows when it will be idle (link.hpp).
//
// Threads: every rank's TUN is multi-queue, one queue per core; queue i of every rank belongs to lane i,
// one thread, SCHED_FIFO and pinned where allowed, that takes packets (uplink and path stages), runs the
// downlink stage when a packet reaches it, and writes packets out at their release time (into queue i of
// the receiver, so that the kernel sends the flow's next packets through queue i too), taking new
// packets between writes.
// One thread rather than a reader and a writer: every write makes the kernel run the receiver's TCP,
// which sends, which would wake a separate reader and cost two context switches per packet. The kernel
// keeps a flow on one queue, and each lane releases in time order with ties in arrival order, so no flow
// is reordered. Links are shared by the lanes under links_mu_; everything else of a lane under its own
// mutex. An optional monitor thread samples the kernel's drop counters every 100 ms.
#ifndef PCCL_WANEM_ROUTER_HPP_
#define PCCL_WANEM_ROUTER_HPP_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "edge.hpp"
#include "faults.hpp"
#include "link.hpp"
#include "packet.hpp"
#include "timeline.hpp"
#include "topology.hpp"

namespace pccl::wanem {

struct PathCount {
  uint64_t segments = 0, lost = 0;  // segments that entered the path, segments lost at random on it
};

// What the faults did (docs/wanem.md, "Faults").
struct FaultCounts {
  uint64_t down = 0, burst = 0, reset = 0, forget = 0, path = 0;  // faults applied, by kind
  uint64_t down_segments = 0;   // segments lost to blackouts
  uint64_t burst_segments = 0;  // segments lost to loss bursts
  uint64_t resets_sent = 0;     // RSTs the emulator sent (one per end of a reset connection that spoke)
};

struct RouterStats {
  Bin total;                       // the whole run
  std::vector<std::vector<PathCount>> paths_count;  // [src][dst]
  uint64_t unknown = 0;            // packets not addressed to another rank, dropped
  LinkStats uplinks, downlinks, paths;  // summed per kind (max/min fields: over the links of that kind)
  FaultCounts faults;
  std::vector<EdgeCounts> edges;   // per rank: its firewall's or NAT's counts (all zero when open)
};

class Router {
 public:
  // tun_fds[lane][rank]: each rank's TUN queue that the lane reads and writes.
  Router(std::vector<std::vector<int>> tun_fds, std::vector<uint32_t> rank_addrs, Topology topology, uint64_t seed);
  ~Router();
  // `kernel_drops` (optional) returns a running count of packets the kernel dropped on the emulator's
  // devices; the monitor thread books its increases as emulator drops.
  void start(std::function<uint64_t()> kernel_drops = {});
  void stop();
  RouterStats stats() const;
  // Applies a fault now (any thread). A kPath fault comes with the topology that includes its line
  // (faults.hpp, PathCheck): every path whose delay, jitter, loss or bottleneck changed takes the new
  // values; its packets already under way keep theirs, and a path never reorders.
  void applyFault(const Fault& f, const Topology* changed);
  // The bins that overlap the intervals, over all lanes and the kernel's drops.
  Bin window(const std::vector<std::pair<int64_t, int64_t>>& intervals) const;

 private:
  struct Buf {
    std::vector<uint8_t> bytes;  // capacity; never resized once pooled (no zero-filling per packet)
    size_t len = 0;
  };
  enum class Stage : uint8_t { kAtDownlink, kRelease };
  struct Event {
    int64_t due_ns;
    uint64_t seq;  // ties leave in arrival order
    Stage stage;
    int src, dst;
    double tun_wait_us;
    PacketInfo info;
    Buf buf;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.due_ns != b.due_ns ? a.due_ns > b.due_ns : a.seq > b.seq; }
  };
  struct Lane {
    std::vector<int> fds;            // per rank: its TUN queue of this lane
    std::vector<int64_t> empty_at;   // per rank: when that queue was last seen empty
    std::mt19937_64 rng;
    std::vector<std::vector<uint64_t>> until_loss;  // per path: segments before the next random loss
    std::vector<std::vector<PathCount>> counts;     // per path (reader only; read under mu at the end)
    std::thread thread;
    std::mutex mu;
    std::priority_queue<Event, std::vector<Event>, Later> events;
    uint64_t seq = 0;
    size_t held_bytes = 0;                 // buffer capacity held by queued events
    std::vector<std::vector<uint8_t>> small_pool, big_pool;
    Timeline timeline;
    uint64_t unknown = 0;
  };

  void laneLoop(Lane& lane);
  // Reads every rank's queue of the lane until it is empty (then sets its empty_at), taking packets in.
  void drain(Lane& lane, Buf& scratch);
  void drainRank(Lane& lane, Buf& scratch, int from);
  // Runs every event due by now, draining the queues after each write; returns the next due time, or -1.
  int64_t writeDue(Lane& lane, Buf& scratch);
  void monitorLoop(std::function<uint64_t()> kernel_drops);
  // The reader's half: uplink, loss, path bottleneck, propagation; queues what survives on the lane.
  void enter(Lane& lane, Buf buf, const PacketInfo& info, int src, int dst, int64_t now_ns, double tun_wait_us);
  // Offers a packet to a link at t; returns what was admitted (the packet, or its admitted segments cut
  // into packets of their own) and sets *depart. Counts the drops in *bin.
  std::vector<std::pair<Buf, PacketInfo>> cross(Lane& lane, Link& link, Buf buf, const PacketInfo& info, int64_t t,
                                                const std::vector<bool>* lost, int64_t* depart, Bin* bin);
  void push(Lane& lane, Event e);  // lane.mu held
  Buf takeBuffer(Lane& lane, bool big);  // lane.mu held
  void recycle(Lane& lane, Buf buf);     // lane.mu held
  int rankOf(uint32_t addr) const;
  // Faults, under links_mu_: true when the packet is lost to a blackout, or taken by a reset (then an RST,
  // unless the reset was a forget: the connection's packets are then dropped for good)
  // is queued for its sender into *rst).
  bool blackedOut(int src, int dst, int64_t now, uint32_t segments);
  bool resetTakes(const Buf& buf, int src, int dst, int64_t now, std::vector<Event>* rst);

  std::vector<uint32_t> addrs_;
  Topology topo_;
  std::vector<std::unique_ptr<Edge>> edges_;  // per rank (edge.hpp); a NAT's public address also finds the rank
  int64_t origin_ns_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Lane>> lanes_;

  mutable std::mutex links_mu_;  // the links and the per-path release order, shared by the lanes
  std::vector<Link> up_, down_;
  std::vector<std::vector<Link>> path_links_;
  std::vector<std::vector<int64_t>> path_last_ns_;
  // Faults (under links_mu_): per ordered pair, blackout and burst deadlines, the burst's loss, the reset
  // generation; per connection (by its two ends), its generation and the ends reset.
  std::vector<std::vector<int64_t>> down_until_, burst_until_;
  std::vector<std::vector<double>> burst_loss_;
  std::vector<std::vector<uint32_t>> reset_gen_;
  std::vector<std::vector<uint8_t>> reset_silent_;  // the pair's last reset was a forget: no RST
  struct FlowState {
    uint32_t gen = 0;
    uint8_t ends_reset = 0;  // bit 0: the lower end, bit 1: the higher end
  };
  std::map<std::pair<uint64_t, uint64_t>, FlowState> flows_;
  FaultCounts fault_counts_;

  std::thread monitor_;
  mutable std::mutex monitor_mu_;
  std::condition_variable monitor_cv_;
  Timeline kernel_;  // the kernel's drops, under monitor_mu_
};

int64_t monotonicNs();  // CLOCK_MONOTONIC, as the phases file uses

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_ROUTER_HPP_
