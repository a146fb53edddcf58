// One direction of a link in pccl-sim: the striper's queue, K TCP connections, and a rate they share.
// Fluid: between two updates every connection that carries a frame sends at a constant rate; the rates
// are the max-min fair shares of the link's rate. When windows are modelled (TcpParams::windows) a
// connection may have at most its window in flight: a token bucket of the window's size, refilled at
// window / RTT (the acknowledgements), lets a connection send a window's worth at its share at once, and
// holds one that has no tokens to window / RTT. Windows follow Linux's TCP in its simplest form:
//   - a new connection starts at 10 segments, ssthresh unbounded;
//   - slow start: the window doubles per round trip while it is below ssthresh (it grows by ln 2 times
//     the bytes sent, so that a window-limited connection doubles per round trip); above, it grows by one
//     segment per window sent (congestion avoidance);
//   - a full drop-tail queue of one bandwidth-delay product: when the windows of the busy connections
//     add up to more than the path holds (rate x RTT) plus the queue, each loses: window and ssthresh
//     become 0.7 x the window (cubic's decrease); the link stays busy (the queue drains meanwhile);
//   - restart after idle (tcp_slow_start_after_idle, on by default): a connection that sends after an
//     idle spell longer than its RTO (RTT + 200 ms) keeps ssthresh at least 3/4 of its window and halves
//     its window per RTO idle, down to 10 segments (tcp_cwnd_restart).
// A waiting frame goes to the idle connection used most recently whose window has room for it, else to
// the one with the most room (the striper's rule, src/collective/striper.hpp).
// Thread: the engine's.
#ifndef PCCL_SIM_LINK_MODEL_HPP_
#define PCCL_SIM_LINK_MODEL_HPP_

#include <cstdint>
#include <deque>
#include <vector>

namespace pccl::sim {

using Time = double;  // seconds

struct LinkParams {
  double bytes_per_s = 0;  // 0: unlimited
  Time delay = 0;          // one way
  Time rtt = 0;            // the round trip of the pair (the windows' clock)
  uint32_t lanes = 1;      // connections sharing the rate
  double queue_bytes = 0;  // the bottleneck's drop-tail queue (windows: a loss when they outgrow it)
};

struct TcpParams {
  bool windows = false;     // off: every busy connection gets an equal share at once (processor sharing)
  double mss = 1448;        // payload bytes per segment
  double initial_segments = 10;
  Time rto_min = 0.2;       // RTO = RTT + rto_min
};

class LinkModel {
 public:
  LinkModel(const LinkParams& p, const TcpParams& tcp);

  const LinkParams& params() const { return p_; }
  // Frames that skip the connections (unlimited rate, no windows) are not given to the model.
  bool immediate() const { return p_.bytes_per_s <= 0 && !windowed(); }
  // A frame of `bytes` on the wire (slot: the engine's name for it) waits for a connection.
  void enqueue(uint32_t slot, double bytes);
  // Moves the link to `t`: frames whose last byte left by then are appended to *done, waiting frames
  // take free connections, rates are shared anew. Returns when the link next changes (a frame ends or a
  // window grows enough to matter); +infinity when it carries nothing.
  Time update(Time t, std::vector<uint32_t>* done);

 private:
  struct Conn {
    int64_t slot = -1;  // the frame it carries, -1: idle
    double left = 0;    // bytes of it still to send
    double rate = 0;    // bytes/s until the next update
    double cwnd = 0, ssthresh = 0;
    double tokens = 0;    // bytes it may send before acknowledgements must come back (<= cwnd)
    Time last_sent = -1;  // when it last finished a frame (-1: never)
    uint64_t used = 0;    // when it last took a frame (a counter)
  };
  bool windowed() const { return tcp_.windows && p_.rtt > 0; }
  double refillRate(const Conn& c) const { return c.cwnd / p_.rtt; }
  void advance(Time t);
  void assign(Time t);
  void restartAfterIdle(Conn& c, Time t) const;
  void share();

  LinkParams p_;
  TcpParams tcp_;
  std::deque<std::pair<uint32_t, double>> waiting_;  // (slot, bytes), FIFO
  std::vector<Conn> conns_;
  Time last_ = 0;
  uint64_t clock_ = 0;
  bool window_limited_ = false;  // some busy connection is held by its window
};

}  // namespace pccl::sim

#endif  // PCCL_SIM_LINK_MODEL_HPP_
