// A peer's side of a link survey round (docs/protocol.md §5.7): sends to the plan's target and/or
// receives from its source over probe connections, then reports to the master.
//
// A probe connection is a ring connection in all but its role (handshake role kProbe): authenticated
// (and sealed when the run encrypts) like the ring's, introduced with a P2PHello signed by the sender's
// ring key whose epoch field is the round's probe id, carrying data frames whose op_id is the probe id.
// The sender opens as many connections as a ring link between the two would have, measures the round
// trip with kPings small frames the receiver echoes, then keeps kProbeDepth frames of kProbeFrameBytes
// queued on each connection until the budget is spent (frames still queued then are taken back) or
// max_bytes are sent, and ends each connection with an empty end frame. The receiver reports the rate of the second half of the transfer (by time),
// past TCP's slow start.
// Thread: the communicator's io thread.
#ifndef PCCL_PEER_LINK_PROBE_HPP_
#define PCCL_PEER_LINK_PROBE_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "net/data_channel.hpp"
#include "net/frame_io.hpp"
#include "net/handshake.hpp"
#include "net/identity.hpp"
#include "peer/hello_acceptor.hpp"
#include "util/clock.hpp"
#include "wire/messages.hpp"

namespace pccl::peer {

inline constexpr uint32_t kProbeFrameBytes = 64 * 1024;  // small: the receiver times every frame
inline constexpr size_t kProbeDepth = 4;
inline constexpr int kPings = 3;
inline constexpr uint32_t kProbeNotSentLowat = 128 * 1024;  // the ring's default (PCCL_NOTSENT_LOWAT)
// Probe data frames' phase field.
inline constexpr uint32_t kProbeData = 0;
inline constexpr uint32_t kProbeEnd = 1;
inline constexpr uint32_t kProbePing = 2;
inline constexpr uint32_t kProbePong = 3;

// The receiver's estimate: bytes of the second half (by time) of `samples` (arrival time, bytes received
// so far) over its duration; the whole transfer's average since `start` when too short to split.
uint64_t steadyRate(const std::vector<std::pair<TimePoint, uint64_t>>& samples, TimePoint start);

class LinkProber : public net::DataSink {
 public:
  using Report = std::function<void(const wire::ProbeReport&)>;

  LinkProber(asio::io_context& io, std::shared_ptr<const net::AuthKey> key,
             std::shared_ptr<const net::SigningKey> identity, Millis handshake_timeout);
  ~LinkProber() override;

  // Runs one round as `self`; `report` runs once, when both sides of the plan are over. Replaces (drops)
  // a round still running.
  void start(const wire::Uuid& self, const wire::ProbePlan& plan, Report report);
  void cancel();  // drops the round in progress without reporting
  // An authenticated kProbe connection from our listener; reads its P2PHello.
  void adopt(net::Link link);
  // The most receive memory one inbound probe connection held, besides nothing else (payloads are
  // discarded in bounded chunks): at most DataChannel::kDiscardChunk.
  size_t receiveBufferPeak() const { return rx_buffer_peak_; }


  Result<net::Placement> place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) override;
  Status deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) override;
  Status discarded(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) override;
  void channelClosed(net::DataChannel& ch, const Status& why) override;

 private:
  struct Out {
    std::shared_ptr<net::DataChannel> ch;
    size_t queued = 0;   // frames handed to the channel, not yet done
    bool ended = false;  // its end frame was queued
  };
  // Opens connection `index` to the target, or (`reverse`: kHelloReverse) to a source that cannot
  // dial us (wire::opensLink).
  void dial(const wire::MemberInfo& to, bool reverse, uint32_t index);
  void sendOn(uint32_t index, const std::shared_ptr<net::DataChannel>& ch);     // to the target
  void receiveOn(uint32_t index, const std::shared_ptr<net::DataChannel>& ch);  // from the source
  void ping();
  void pump(size_t conn);
  void txFinish(const std::string& error);
  void rxFinish(const std::string& error);
  void maybeReport();
  void closeAll();
  bool isOut(const net::DataChannel& ch) const;

  asio::io_context& io_;
  std::shared_ptr<const net::AuthKey> key_;
  std::shared_ptr<const net::SigningKey> identity_;
  Millis handshake_timeout_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  // The round.
  bool running_ = false;
  wire::Uuid self_{};
  wire::ProbePlan plan_;
  Report report_;
  asio::steady_timer deadline_;
  // Send side.
  bool tx_over_ = true;
  std::string tx_error_;
  std::vector<Out> out_;
  size_t out_up_ = 0;
  int pings_left_ = 0;
  TimePoint ping_sent_{};
  uint64_t rtt_us_ = 0;
  bool sending_ = false;
  bool budget_spent_ = false;  // queued frames were taken back
  TimePoint send_until_{};
  asio::steady_timer stop_timer_;
  uint64_t tx_bytes_ = 0;
  // Receive side: the source's connections (a probe id being the acceptor's round).
  bool rx_over_ = true;
  std::string rx_error_;
  HelloAcceptor acceptor_;  // the source's connections, and a target's that dials us
  std::vector<std::shared_ptr<net::DataChannel>> in_;  // the source's, whichever side opened them
  std::vector<bool> in_ended_;  // per inbound connection: its end frame arrived
  size_t ends_ = 0;
  TimePoint rx_start_{};
  std::vector<std::pair<TimePoint, uint64_t>> samples_;
  uint64_t rx_bytes_ = 0;
  size_t rx_buffer_peak_ = 0;

  std::vector<uint8_t> zeros_;  // what the sender sends
};

}  // namespace pccl::peer

#endif  // PCCL_PEER_LINK_PROBE_HPP_
