// Stripes the data frames of every operation over the K connections to the successor, pulled rather
// than pushed: a frame waits here, in the order it became ready, until a connection has nothing of
// its own to write (its previous frame is in the kernel), and then goes to that connection. So each
// connection holds at most one of our frames plus what its kernel buffer keeps (bounded by
// TCP_NOTSENT_LOWAT where set), a connection slowed by a loss takes fewer frames, and none sits idle
// while another still has a queue: no segment is committed early to a connection that then stalls.
// Among idle connections, the one used most recently whose congestion window has room for the whole
// frame goes first, so that small operations stay on connections whose windows are open; when none
// has, the one with the most room (net/tcp_window.hpp). After a pause the kernel restarts each
// window from the initial one, so a burst then spreads over the connections, each sending what fits
// in one round trip, instead of queueing behind one connection's slow start. With one idle connection
// nothing is asked of the kernel.
// With a tuner (collective/connection_tuner.hpp) only the first active() connections take frames; the
// striper measures, per interval of a few round trips, how long frames waited for a connection and
// how many bytes the remote acknowledged (TCP_INFO), and gives the tuner that sample. Links that lend
// payloads (same host) are not tuned.
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_STRIPER_HPP_
#define PCCL_COLLECTIVE_STRIPER_HPP_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "collective/connection_tuner.hpp"
#include "net/data_channel.hpp"
#include "util/clock.hpp"

namespace pccl::collective {

class Striper : public std::enable_shared_from_this<Striper> {
 public:
  using Channels = std::vector<std::shared_ptr<net::DataChannel>>;

  explicit Striper(Channels channels) : channels_(std::move(channels)), used_(channels_.size(), 0) {}
  ~Striper();
  // Lets `tuner` choose how many connections take frames (before attach()); `on_change` hears the new
  // count each time it changes.
  using OnTuned = std::function<void(uint32_t active)>;
  void setTuner(std::shared_ptr<ConnectionTuner> tuner, OnTuned on_change);
  // The connections that take frames now.
  uint32_t active() const;
  // Starts listening to the connections (they tell us when they have nothing left to write).
  void attach();

  // `payload` must stay valid until `done` runs; `done` runs exactly once. `region`: the operation's
  // buffer holding the payload, where a same-host connection may lend it from (DataChannel::send).
  void send(const wire::DataHeader& h, const uint8_t* payload, uint32_t bytes, net::DataChannel::SendDone done,
            const wire::LendRegion& region = {});
  // Takes back the frames of (op_id, seq) still waiting here or queued on a connection and not being
  // written: their `done` runs with `why`. Returns how many.
  size_t cancel(uint64_t op_id, uint32_t seq, const Status& why);
  // Fails every waiting frame (the connections are gone).
  void failAll(const Status& why);
  size_t waiting() const { return queue_.size(); }
  const Channels& channels() const { return channels_; }

 private:
  struct Frame {
    wire::DataHeader h;
    const uint8_t* payload;
    uint32_t bytes;
    net::DataChannel::SendDone done;
    wire::LendRegion region;
  };
  void pump();
  // The idle connection among the first `n` for a frame of `bytes` (channels_.size(): none); `open`:
  // whether any of them is open.
  size_t pick(size_t n, uint32_t bytes, bool* open) const;
  bool tuned() const;
  // After the queue changed: the time frames waited, and every interval a sample for the tuner.
  void account();
  void sample(TimePoint now);

  Channels channels_;
  std::deque<Frame> queue_;
  std::vector<uint64_t> used_;  // per connection: when it last took a frame (clock_)
  uint64_t clock_ = 0;
  bool pumping_ = false;
  // Tuning.
  std::shared_ptr<ConnectionTuner> tuner_;
  OnTuned on_tuned_;
  TimePoint sample_start_{};
  TimePoint mark_{};
  bool waiting_ = false;                // frames were waiting here since mark_
  int64_t waited_us_ = 0;               // this sample
  uint64_t interval_us_ = 0;
  std::vector<uint64_t> acked_;         // per connection: bytes_acked at the sample's start
  bool baseline_ = false;               // acked_ holds a sample's start
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_STRIPER_HPP_
