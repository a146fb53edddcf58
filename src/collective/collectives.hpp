// The peer's side of collectives: every all-reduce is announced to the master, started under the
// op id the master assigns once every peer of the group agreed, run on the ring, reported done, and
// completed only when the master says every participant finished (so all succeed or all fail).
// Also the DataSink of the ring's connections: routes each incoming frame to its operation.
//
//   submit ──OpAnnounce──► kAnnounced ──OpStart──► kRunning ──ring done, OpDone──► kLocalDone
//   kLocalDone ──OpComplete──► success
//   any ──OpAbort / failure / deadline / link lost──► failed (in-place input restored)
//
// A failure while data may be in flight closes the ring's connections (the next update rebuilds them).
// Thread: the communicator's io thread, except where noted.
#ifndef PCCL_COLLECTIVE_COLLECTIVES_HPP_
#define PCCL_COLLECTIVE_COLLECTIVES_HPP_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codec/dtype.hpp"
#include "collective/buffer_pool.hpp"
#include "collective/ring_allreduce.hpp"
#include "net/data_channel.hpp"
#include "peer/master_link.hpp"
#include "util/clock.hpp"

namespace pccl::collective {

struct ReduceRequest {
  uint64_t tag = 0;
  const uint8_t* input = nullptr;  // for in-place operations: the saved copy of the user's buffer
  uint8_t* output = nullptr;
  size_t count = 0;
  codec::DType dtype = codec::DType::kFloat32;
  codec::RedOp op = codec::RedOp::kSum;
  codec::Quant quant = codec::Quant::kNone;
  int compress = 0;  // zstd level on the wire, 0 = off
  uint32_t segment_bytes = 1 << 20;
  Millis timeout{0};
  TimePoint submitted{};
  BufferPool::Buffer saved;  // in-place: the input's copy; restored into output on failure
  codec::gpu::Engine* device = nullptr;  // input and output are device memory of this engine
  codec::gpu::Block saved_device;        // device in-place: the input's copy, on the GPU
};

struct ReduceOutcome {
  Status status;
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
  uint32_t world_size = 0;
  double seconds = 0;
};
using Completion = std::function<void(const ReduceOutcome&)>;

class Collectives : public net::DataSink {
 public:
  using Channels = RingAllReduce::Channels;
  using ResetRing = std::function<void(const Status&)>;

  Collectives(asio::io_context& io, BufferPool* pool, ResetRing reset_ring);
  ~Collectives() override;

  void setLink(peer::MasterLink* link) {  // a new session (after connect()) clears an old loss
    link_ = link;
    if (link != nullptr) link_down_ = Status::ok();
  }
  void setName(std::string name) { name_ = std::move(name); }
  // A new ring is installed: our rank and world within the group, and its connections (empty when
  // we are alone). Starts reading from them.
  void setRing(uint64_t epoch, uint32_t rank, uint32_t world, Channels successor, Channels predecessor);
  void clearRing();  // a rebuild started; the old connections are about to close

  void submit(ReduceRequest req, Completion done);
  void onStart(const wire::OpStart& m);
  void onAbort(const wire::OpAbort& m);
  void onComplete(const wire::OpComplete& m);
  void failAll(const Status& why);  // we are leaving: every operation in flight fails
  // The link to the master is gone for good: everything in flight fails, and so does every later
  // submit (with the same reason) instead of waiting for an answer that cannot come.
  void linkLost(const Status& why);
  size_t active() const { return by_tag_.size(); }

  // net::DataSink
  Result<net::Placement> place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) override;
  Status deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) override;
  void channelClosed(net::DataChannel& ch, const Status& why) override;

 private:
  enum class State { kAnnounced, kRunning, kLocalDone, kFailing };
  struct Op {
    explicit Op(asio::io_context& io) : timer(io) {}
    ReduceRequest req;
    Completion done;
    State state = State::kAnnounced;
    uint64_t op_id = 0;
    uint32_t world = 1;
    std::shared_ptr<RingAllReduce> ring;
    BufferPool::Buffer wire;  // coded operations: the segments' wire bytes
    codec::gpu::Block wire_pinned, wire_device;  // device buffers: the wire bytes, pinned and on the GPU
    asio::steady_timer timer;
  };

  void run(Op& op);
  void ringFinished(uint64_t op_id, const Status& s);
  void localDone(Op& op);
  // Ends `op` with `why`; tells the master when `tell_master`; closes the ring when data may be in flight.
  void failOp(Op& op, const Status& why, bool tell_master);
  void finishOp(Op& op, const Status& s);
  Status deviceCopy(codec::gpu::Engine& e, void* dst, const void* src, size_t bytes);
  void timedOut(uint64_t tag);
  void resumePaused();
  bool ours(const net::DataChannel& ch, const Channels& list) const;
  Op* byId(uint64_t op_id);

  asio::io_context& io_;
  BufferPool* pool_;
  codec::Compressor compressor_;  // zstd contexts of this io thread
  ResetRing reset_ring_;
  peer::MasterLink* link_ = nullptr;
  Status link_down_;  // why the master cannot be reached any more (OK while it can)
  std::string name_ = "peer=?";
  uint64_t epoch_ = 0;
  uint32_t rank_ = 0;
  uint32_t world_ = 1;
  Channels successor_;
  Channels predecessor_;
  Status ring_broken_;  // why the current ring can no longer carry data
  Status failing_all_;  // while failAll() runs: its reason (OK otherwise)
  std::map<uint64_t, std::unique_ptr<Op>> by_tag_;
  std::map<uint64_t, Op*> by_id_;
  uint64_t max_started_ = 0;  // highest op id the master told us about (start or abort)
  std::vector<std::weak_ptr<net::DataChannel>> paused_;  // waiting for an OpStart they are ahead of
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_COLLECTIVES_HPP_
