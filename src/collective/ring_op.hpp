// One call's data movement on the ring, whichever algorithm moves it (ring_collective.hpp for large
// operations, gather_allreduce.hpp for small ones). Collectives drives it through this interface: it
// hands over the frames that arrive for the call, and learns once that every byte has arrived and every
// send completed, or the first failure. The base keeps what every algorithm shares: its sends on the
// stripers and their completions, the end (once), and the quiet point after a failure (no frame of the
// call being written, so its buffers may be freed).
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_RING_OP_HPP_
#define PCCL_COLLECTIVE_RING_OP_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "collective/striper.hpp"
#include "pccl/status.hpp"
#include "wire/data.hpp"

namespace pccl::collective {

class RingOp : public std::enable_shared_from_this<RingOp> {
 public:
  using Finished = std::function<void(const Status&)>;
  virtual ~RingOp() = default;

  virtual void start() = 0;
  // The successor's hello arrived (it made the call too).
  virtual void successorReady() {}
  // Where the payload of an incoming frame of this call goes, after checking that the frame is one we
  // expect and have not had yet.
  virtual Result<uint8_t*> placement(const wire::DataHeader& h, uint32_t bytes) = 0;
  // The payload (`bytes`) has landed at placement(h). An error fails the call.
  virtual Status delivered(const wire::DataHeader& h, uint32_t bytes) = 0;

  // No more sends are issued and `finished` runs with `why` if it has not run yet.
  void fail(const Status& why);
  // After fail(): takes back our frames still queued on the connections, and runs `quiet` once no
  // frame of ours is being written any more (at once if none is): then nothing reads the buffers.
  virtual void whenQuiet(std::function<void()> quiet);
  virtual size_t sendsInFlight() const { return ownSendsInFlight(); }
  virtual uint64_t bytesSent() const { return bytes_sent_; }
  virtual uint64_t bytesReceived() const { return bytes_received_; }
  // Two-level (two_level_allreduce.hpp): the call's hello from group rank `rank` arrived (it made the
  // call too); and where a frame from `from` goes. The plain ring and the gather get their frames from
  // the ring's neighbours alone, checked by Collectives.
  virtual void readyFrom(uint32_t rank) { (void)rank; }
  virtual Result<uint8_t*> placementFrom(uint32_t from, const wire::DataHeader& h, uint32_t bytes) {
    (void)from;
    return placement(h, bytes);
  }
  // A frame from `from` that was placed will not be delivered: its resumable connection broke while
  // the payload was read (net/data_channel.hpp). It comes again and may then be placed again.
  virtual void withdraw(uint32_t from, const wire::DataHeader& h) = 0;
  // Two-level: the group ranks besides the flat predecessor that send us more than the eager limit
  // before our hello, sorted (Collectives sends them our hello when we make the call).
  virtual std::vector<uint32_t> helloTo() const { return {}; }
  // A part of a composite call (composite_op.hpp): a payload inside one of the call's `regions` is
  // lent from that region rather than from the part's own buffer in it.
  void lendFrom(const std::vector<wire::LendRegion>& regions);

 protected:
  RingOp(uint64_t op_id, uint32_t seq, std::vector<std::shared_ptr<Striper>> stripers, Finished finished);
  // A buffer of the call that its frames may be lent from (net/lending.hpp): the constructor of each
  // algorithm names its host buffers; a payload outside all of them always goes through the socket.
  void lendableRegion(const uint8_t* base, size_t bytes);
  // Sends one frame on `to` (one of the stripers); `payload` stays untouched until the call is quiet.
  void send(Striper& to, const wire::DataHeader& h, const uint8_t* payload, uint32_t bytes);
  // Ends the call successfully once complete() holds and no send is outstanding.
  void maybeFinish();
  // Every frame received and every other piece of work done (the sends are counted here).
  virtual bool complete() const = 0;
  // fail(): stop work running elsewhere (device jobs) before `finished` runs.
  virtual void stopWork() {}
  bool over() const { return over_; }
  // An incoming segment's length against its wire size `raw` (compressed: 1..raw-1, and only in an
  // operation with compression) and whether it came before (`seen`, set here). A protocol error names
  // it as "op <op_id> <phase_name> <h.phase>".
  static Status acceptSegment(const wire::DataHeader& h, uint32_t bytes, size_t raw, bool compress, uint8_t& seen,
                              const char* phase_name);
  size_t sendsIssued() const { return sends_issued_; }
  size_t ownSendsInFlight() const { return sends_issued_ - send_done_; }  // sent by this op itself
  size_t sendsDone() const { return send_done_; }
  uint64_t bytes_received_ = 0;

 private:
  uint64_t op_id_;
  uint32_t seq_;
  std::vector<std::shared_ptr<Striper>> stripers_;
  Finished finished_;
  bool over_ = false;
  size_t sends_issued_ = 0;  // handed to a connection (send_done_ counts their completions)
  size_t send_done_ = 0;
  uint64_t bytes_sent_ = 0;
  std::function<void()> quiet_;
  std::vector<wire::LendRegion> lendable_;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_RING_OP_HPP_
