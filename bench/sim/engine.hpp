// pccl-sim's discrete-event engine: virtual time, one queue of events, the network's directed links
// and each peer's CPU. It knows frames, links and peers, not algorithms: an operation (operation.hpp)
// hands it frames to send and hears when each one's last byte left the sender and when it was
// delivered. Deterministic: events at the same instant run in the order they were scheduled.
//
// The network model (docs/sim.md):
//   - a directed link from peer a to peer b has a rate (TCP payload bytes per second; 0 = unlimited), a
//     one-way delay, and K connections (the K striped TCP connections of a ring link): link_model.hpp;
//   - frames wait in the link's FIFO (the striper's queue) until a connection is free; the busy
//     connections share the rate (max-min fair, each capped by its TCP window when windows are modelled);
//   - a frame's last byte leaves when its connection has sent it, and arrives `delay` later;
//   - control frames (hello, prepared, commit) skip the queue and the connections: they arrive after their
//     serialisation at the full rate plus the delay;
//   - each peer has one CPU (the communicator's io thread): with a reduce rate set, every data frame it
//     receives takes bytes / rate of it, in arrival order, before the operation sees it.
// Thread: one (the caller's).
#ifndef PCCL_SIM_ENGINE_HPP_
#define PCCL_SIM_ENGINE_HPP_

#include <cstddef>
#include <cstdint>
#include <queue>
#include <vector>

#include "link_model.hpp"

namespace pccl::sim {

struct Frame {
  uint32_t op = 0;            // the operation's index in the engine (Engine::add)
  uint32_t from = 0, to = 0;  // group ranks within that operation
  uint32_t kind = 0;          // the operation's own meaning (a data phase, a control kind)
  uint32_t a = 0;             // the operation's own meaning (a phase, an origin, a streak)
  uint64_t b = 0;             // the operation's own meaning (a segment)
  uint64_t bytes = 0;         // payload
  bool control = false;
};

struct LinkStats {
  uint64_t frames = 0;
  uint64_t payload_bytes = 0;  // data frames' payloads only
  uint64_t wire_bytes = 0;     // everything serialised, headers included
};

// What an operation is told. Both run inside Engine::run.
class Listener {
 public:
  virtual ~Listener() = default;
  virtual void sent(const Frame& f, Time t) = 0;       // its last byte left the sender
  virtual void delivered(const Frame& f, Time t) = 0;  // arrived (and, with a CPU model, processed)
  virtual void timer(uint32_t peer, uint64_t token, Time t) = 0;
};

struct EngineParams {
  uint64_t frame_overhead_bytes = 70;  // per frame on the wire: frame header (20) + data header (50)
  double cpu_bytes_per_s = 0;          // a peer reduces/copies received payloads at this rate; 0: free
  TcpParams tcp;                       // the connections' windows (off: processor sharing)
};

class Engine {
 public:
  // `peers`: the network's peers; the links between them come from `link(a, b)` when first used.
  using LinkFn = LinkParams (*)(const void* ctx, uint32_t from, uint32_t to);
  Engine(uint32_t peers, EngineParams params, LinkFn link_fn, const void* link_ctx);

  // An operation; its frames name group ranks, which `peer_of` maps to the network's peers.
  uint32_t add(Listener* op, std::vector<uint32_t> peer_of);
  void send(const Frame& f);
  void at(Time t, uint32_t op, uint32_t rank, uint64_t token);  // Listener::timer at t
  // Runs until no event is left.
  void run();
  Time now() const { return now_; }
  uint64_t events() const { return events_; }

  // Statistics of the link from peer a to peer b (zeros if it carried nothing).
  LinkStats linkStats(uint32_t from_peer, uint32_t to_peer) const;
  // Every link that carried something: (from, to, stats).
  struct LinkRecord {
    uint32_t from, to;
    LinkParams params;
    LinkStats stats;
  };
  std::vector<LinkRecord> links() const;

 private:
  enum class Ev : uint8_t { kLinkDone, kSent, kArrive, kProcessed, kTimer };
  struct Event {
    Time t;
    uint64_t seq;
    Ev kind;
    uint32_t x;  // link, frame slot or op
    uint64_t y;  // generation, token
    uint32_t z;  // timer rank
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  struct Link {
    uint32_t from = 0, to = 0;
    LinkModel model;
    uint64_t generation = 0;  // of the link's pending kLinkDone: older ones are stale
    LinkStats stats;
  };
  struct Op {
    Listener* listener;
    std::vector<uint32_t> peer_of;
  };

  void push(Time t, Ev kind, uint32_t x, uint64_t y = 0, uint32_t z = 0);
  uint32_t linkOf(uint32_t from_peer, uint32_t to_peer);
  uint32_t store(const Frame& f);
  uint64_t wireBytes(const Frame& f) const { return f.bytes + params_.frame_overhead_bytes; }
  void service(uint32_t li, Time t);  // the link moved to t: frames done, the next event
  void arrive(uint32_t slot, Time t);
  void processed(uint32_t slot, Time t);

  uint32_t peers_;
  EngineParams params_;
  LinkFn link_fn_;
  const void* link_ctx_;
  std::priority_queue<Event, std::vector<Event>, Later> events_q_;
  uint64_t seq_ = 0, events_ = 0;
  Time now_ = 0;
  std::vector<int32_t> link_index_;  // [from * peers + to] -> links_, -1 = not yet
  std::vector<Link> links_;
  std::vector<Frame> frames_;  // slots
  std::vector<uint32_t> free_;
  std::vector<uint32_t> done_;  // service's scratch
  std::vector<Time> cpu_free_;  // per peer
  std::vector<Op> ops_;
};

}  // namespace pccl::sim

#endif  // PCCL_SIM_ENGINE_HPP_
