// A ring connection carrying data frames, after authentication and the ring hello.
// Receive: each frame's DataHeader is shown to the sink, which says where its elements go (straight
// into their destination, into the channel's staging buffer, discarded, or "pause until I know"). A
// discarded payload is read and dropped in chunks of kDiscardChunk bytes, so discarding never takes more
// memory than that, whatever the frame's size; sealed, its tag is not checked (nothing uses its bytes;
// its nonce is consumed, and the DataHeader that said how long it is was authenticated).
// Send: a FIFO of (header, pointer, length) written with one gather write each: no copy of the payload.
// Encrypted runs (docs/protocol.md §6): the DataHeader and the payload are sealed separately, each
// followed by its tag, with the clear frame header as associated data:
//   frame header | sealed DataHeader | tag | sealed payload | tag
// so the sink still sees the header before choosing where the payload goes. The payload is read
// straight into its destination and decrypted there; on send it is encrypted into the channel's one
// reusable buffer (the caller's bytes are never modified), as one write is in flight at a time.
// Same-host lending (net/lending.hpp), when enabled: large payloads are lent rather than written (the
// remote copies them out of our memory when it reads the frame), so a payload must stay unchanged
// longer than `done`: until the remote can no longer read it (see enableLending()).
// Resumable connections (enableResume(), data_channel_resume.cpp, docs/protocol.md §5.4.3): frames
// are numbered and acknowledged now and then; when the socket breaks (a reset, an error, no TCP
// acknowledgement for the stall time) the channel stays open, broken, until the owner hands it a new
// authenticated socket to the same peer (resumeOn()), and then writes again what the remote did not
// take in. The sink never sees the break, except for a frame being read at that moment: it is
// abandoned (DataSink::abandoned) and comes again. Not replaced within the wait, the channel closes.
// Thread: the owning io_context's thread.
#ifndef PCCL_NET_DATA_CHANNEL_HPP_
#define PCCL_NET_DATA_CHANNEL_HPP_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "net/asio.hpp"
#include "net/lending.hpp"
#include "net/link.hpp"
#include "net/resend_log.hpp"
#include "net/tcp_window.hpp"
#include "pccl/status.hpp"
#include "util/clock.hpp"
#include "wire/data.hpp"

namespace pccl::net {

class DataChannel;

struct Placement {
  enum class Kind { kDirect, kStage, kDiscard, kPause };
  Kind kind = Kind::kDiscard;
  uint8_t* ptr = nullptr;  // kDirect: where the payload goes
  static Placement direct(uint8_t* p) { return {Kind::kDirect, p}; }
  static Placement stage() { return {Kind::kStage, nullptr}; }
  static Placement discard() { return {Kind::kDiscard, nullptr}; }
  static Placement pause() { return {Kind::kPause, nullptr}; }
};

class DataSink {
 public:
  virtual ~DataSink() = default;
  // Where do `bytes` of payload for `h` go? A failed Result closes the channel with that reason.
  virtual Result<Placement> place(DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) = 0;
  // The payload has arrived at `data` (the direct pointer, or the staging buffer). Not called for discards.
  virtual Status deliver(DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) = 0;
  // A payload placed kDiscard has been read (and dropped) to its end.
  virtual Status discarded(DataChannel&, const wire::DataHeader&, uint32_t) { return Status::ok(); }
  // A resumable channel broke while reading the payload of `h`, placed direct or staged and not yet
  // delivered: forget the placement (the frame comes again, and is placed again, after the resume).
  virtual void abandoned(DataChannel&, const wire::DataHeader&) {}
  virtual void channelClosed(DataChannel& ch, const Status& why) = 0;
};

// How a resumable channel waits and what it tells its owner (enableResume()).
struct ResumeOptions {
  Millis wait{10000};  // a broken connection not replaced within this closes the channel (PeerLost)
  Millis stall{0};     // data in flight and no TCP acknowledgement for this long: broken (0: never)
  // The connection broke: the end that dialled it dials again (with the channel's framesReceived()).
  std::function<void(DataChannel&, const Status& why)> broken;
  // A new connection took over: `resent` bytes written again, after `stalled` without a connection.
  std::function<void(DataChannel&, uint64_t resent, Millis stalled)> resumed;
};

class DataChannel : public std::enable_shared_from_this<DataChannel> {
 public:
  using SendDone = std::function<void(const Status&)>;

  DataChannel(Link link, uint64_t epoch, std::string name);
  ~DataChannel();

  static constexpr size_t kDiscardChunk = 64 * 1024;
  // A lender's regions a receiver keeps: per operation (an operation lends from its input, output,
  // scratch and wire buffers), and in all (operations in flight on one connection).
  static constexpr size_t kMaxLendRegionsPerOp = 8;
  static constexpr size_t kMaxLendRegions = 8 * 65536;

  // Before start(): offer our memory to the remote (it reads lent payloads there, once it proved it
  // can) and accept its offer. For connections to a neighbour on this host (RingPlan). Once the remote
  // accepted, a send of kLendMinBytes or more completes when its record is written, and the remote
  // reads the payload later: only for callers whose payloads stay unchanged until the remote has read
  // them or no longer uses what it read. The ring's are (docs/algorithms.md §5): an operation's
  // buffers live until it ends, it commits only once every peer holds all its data, and a failed
  // operation fails everywhere.
  // `role`: which end of the connection this channel is (the offer's token depends on it).
  void enableLending(LendRole role) {
    lend_ok_ = true;
    role_ = role;
  }
  void start(DataSink* sink);
  // Before start(), when both ends agreed (the P2PHello / P2PAccept flags): the connection resumes.
  void enableResume(ResumeOptions options);
  bool resumable() const { return resumable_; }
  bool broken() const { return broken_; }
  // Frames taken in (delivered or discarded) so far, over every connection this channel had.
  uint64_t framesReceived() const { return recv_count_; }
  // The connection is given up (a new one from the remote is taking over, or the owner saw it fail):
  // the channel is broken, as if its socket had failed with `why`. Resumable channels only.
  void detach(const Status& why) { breakOff(why); }
  // A new authenticated connection to the same peer replaces the broken one; the remote has taken in
  // `remote_received` frames. Writes again what it lacks and goes on. An error (a count this end
  // could not have produced) closes the channel.
  Status resumeOn(Link link, uint64_t remote_received);
  uint64_t reconnects() const { return reconnects_; }
  uint64_t resentBytes() const { return resent_bytes_; }
  // TCP_NOTSENT_LOWAT: the kernel keeps at most about `bytes` not yet sent (0: the kernel's default,
  // unlimited), so what waits to be sent waits in pccl, where it can still go to another connection.
  void setNotSentLowat(uint32_t bytes);
  // SO_MAX_PACING_RATE (bytes/s; 0 = leave it): the kernel paces this connection's packets (TCP internal pacing).
  void setMaxPacingRate(uint64_t bytes_per_second);
  // The smallest round trip the kernel has seen on this connection (TCP_INFO tcpi_min_rtt), µs; 0 when
  // unknown (closed, or a kernel without it).
  uint64_t minRttUs() const;
  // Bytes a write now would send at once within the congestion window (net/tcp_window.hpp: the window
  // as the kernel restarts it after idleness); net::kUnknownRoom when the kernel does not say.
  int64_t sendRoom() const;
  // The connection's TCP_INFO fields (net/tcp_window.hpp); false while closed or broken, or when the
  // kernel does not say.
  bool tcpWindow(TcpWindow* w) const;
  void resume();  // after a kPause placement: asks the sink again
  // `payload` must stay valid until `done` runs. `done` runs exactly once (also when the channel closes).
  // `region`: the buffer of the operation (h.op_id, h.seq) that holds the payload, if it may be lent:
  // a payload is lent only from inside such a region, which the remote hears of first (once per
  // operation and region) and bounds its reads by.
  void send(const wire::DataHeader& h, const uint8_t* payload, uint32_t bytes, SendDone done,
            const wire::LendRegion& region = {});
  // The operation (op_id, seq) has ended here: the remote forgets the regions we announced for it, and
  // the resend log the frames it kept by pointer (their buffers go back to their owner).
  void operationEnded(uint64_t op_id, uint32_t seq);
  // A frame whose payload the channel keeps (control frames): nothing to keep alive, nothing to hear back.
  void sendOwned(const wire::DataHeader& h, std::vector<uint8_t> payload);
  // Takes back the frames of (op_id, seq) queued and not yet being written: their `done` runs with
  // `why`. A frame being written is left to finish. Returns how many were taken back.
  size_t cancelQueued(uint64_t op_id, uint32_t seq, const Status& why);
  void close(const Status& why);  // idempotent; fails pending sends; tells the sink once

  bool isOpen() const { return !closed_; }  // also while broken, waiting for a new connection
  // Nothing of ours being written or queued (the kernel may still hold bytes to send); never while broken.
  bool idle() const { return !writing_ && out_.empty() && !broken_; }
  // Called each time the channel becomes idle after a write (not when it closes).
  void setOnIdle(std::function<void()> fn) { on_idle_ = std::move(fn); }
  // Bytes accepted for sending but not yet acknowledged by the remote: our queue plus the kernel's
  // send queue (SIOCOUTQ). Used to send each segment on the least loaded connection.
  uint64_t backlog() const;
  const std::string& name() const { return name_; }
  uint64_t bytesSent() const { return bytes_sent_; }  // payload bytes (lending's own frames not counted)
  uint64_t bytesReceived() const { return bytes_received_; }
  bool lending() const { return lending_; }          // the remote reads our large payloads in our memory
  bool borrowing() const { return lender_pid_ != 0; }  // we read the remote's
  // During the sink's place() and deliver(): the frame's elements are read from the lender's memory.
  bool lentFrame() const { return reading_lent_; }
  // Memory held for receiving besides the destinations: the staging buffer and the discard chunk.
  size_t receiveBufferBytes() const { return staging_.capacity() + discard_.capacity(); }

 private:
  struct Pending {
    std::array<uint8_t, wire::kHeaderSize + wire::kDataHeaderSize> head;
    const uint8_t* payload;
    uint32_t bytes;
    SendDone done;
    uint64_t op_id = 0;
    uint32_t seq = 0;
    std::shared_ptr<std::vector<uint8_t>> owned;  // sendOwned: the payload
    bool lent = false;                             // the frame carries `rec` instead of the payload
    bool link = false;                             // a frame of lending or resuming: not counted in bytesSent()
    std::array<uint8_t, wire::kLendRecordSize> rec{};
    uint64_t number = 0;   // resumable: the frame's number, from its first write on (0: not written yet)
    bool resend = false;   // written again after a resume (counted in resentBytes(), not bytesSent())
  };
  static constexpr size_t kMaxHead = wire::kHeaderSize + wire::kDataHeaderSize + kAeadTagBytes;
  size_t headBytes() const { return wire::kHeaderSize + wire::kDataHeaderSize + sealOverhead(crypto_); }
  void enqueue(Pending p);
  void readHead();
  Status openHead();
  void placeAndRead();
  void discardRest(uint32_t left);
  void writeNext();
  void writeSealed(const uint8_t* payload, uint32_t bytes);
  void written(const asio::error_code& ec);
  Pending linkFrame(uint32_t flag, std::vector<uint8_t> payload, uint64_t op_id = 0, uint32_t seq = 0) const;
  void sendLinkFrame(uint32_t flag, std::vector<uint8_t> payload, uint64_t op_id = 0, uint32_t seq = 0);
  Status onLentRecord(const uint8_t* payload, uint32_t bytes);
  void readLinkFrame();
  Status onLinkFrame(const uint8_t* payload, uint32_t bytes);
  void copyLent(const Placement& p);
  // data_channel_resume.cpp
  void lost(const Status& why);  // the socket failed: broken when resumable, else closed
  void breakOff(const Status& why);
  bool stale(uint64_t gen) const { return closed_ || gen != gen_; }  // a handler of a replaced socket
  void frameTaken();  // a numbered frame was delivered or discarded
  void sendAck();
  Pending nextSeqFrame(uint64_t number) const;  // kDataNextSeq: "the next frame I write is `number`"
  Status onResumeFrame(const uint8_t* payload, uint32_t bytes);
  void armStallCheck();
  void checkStall();
  void applySocketOptions();

  Tcp::socket socket_;
  SessionCrypto crypto_;
  uint64_t epoch_;
  std::string name_;
  DataSink* sink_ = nullptr;
  std::array<uint8_t, kMaxHead> head_{};
  AeadTag payload_tag_{};               // encrypted runs: the tag after the payload being read
  std::array<uint8_t, kMaxHead> sealed_head_{};
  std::vector<uint8_t> sealed_;         // encrypted runs: the payload being written, then its tag
  wire::DataHeader current_{};
  uint32_t current_bytes_ = 0;
  bool paused_ = false;
  std::vector<uint8_t> staging_;  // grows to the largest staged frame, then is reused
  std::vector<uint8_t> discard_;  // kDiscardChunk bytes once a payload was discarded
  std::deque<Pending> out_;
  bool writing_ = false;
  bool closed_ = false;
  mutable int restarts_ = -1;  // sendRoom: whether the window restarts after idleness (-1: not asked yet)
  std::function<void()> on_idle_;
  uint64_t queued_bytes_ = 0;  // payload bytes in out_
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  // Lending (net/lending.hpp).
  using OpRef = std::pair<uint64_t, uint32_t>;  // (op_id, seq)
  bool lend_ok_ = false;                // enableLending() was called
  LendRole role_ = LendRole::kDialer;
  SessionId session_{};           // the handshake's session id (the offer's token depends on it)
  std::unique_ptr<LendSlot> slot_;      // what our offer asks the remote to read in our memory
  std::map<OpRef, std::vector<wire::LendRegion>> regions_out_;  // announced to the remote, per operation
  std::map<OpRef, std::vector<wire::LendRegion>> regions_in_;   // the remote's, per operation
  size_t regions_in_count_ = 0;
  std::array<uint8_t, wire::kLendRecordSize> rec_out_{};  // the lend record being written
  bool lending_ = false;                // the remote accepted our offer
  bool offered_ = false;                // the remote sent its offer
  uint32_t lender_pid_ = 0;             // we accepted the remote's offer: its process
  std::array<uint8_t, wire::kLendOfferSize + kAeadTagBytes> link_in_{};  // an offer's or lent record's payload
  bool reading_lent_ = false;           // current_ is a lent frame: its elements are at lent_addr_
  uint64_t lent_addr_ = 0;
  uint32_t notsent_lowat_ = 0;          // applied again to a new socket
  uint64_t pacing_rate_ = 0;
  // Resuming (data_channel_resume.cpp).
  bool resumable_ = false;
  ResumeOptions resume_;
  bool broken_ = false;
  uint64_t gen_ = 0;                    // which socket: handlers of a replaced one do nothing
  TimePoint broken_at_{};
  bool placed_ = false;                 // current_ was placed direct or staged and not delivered yet
  ResendLog log_;                       // what we wrote and the remote has not acknowledged
  uint64_t wire_next_ = 1;              // the number the remote expects next on this socket
  uint64_t recv_count_ = 0;             // frames taken in
  uint64_t ack_sent_ = 0;               // the count we last acknowledged
  bool ack_armed_ = false;
  std::unique_ptr<asio::steady_timer> resume_timer_, ack_timer_, stall_timer_;
  uint64_t reconnects_ = 0;
  uint64_t resent_bytes_ = 0;
};

}  // namespace pccl::net

#endif  // PCCL_NET_DATA_CHANNEL_HPP_
