// One collective on the ring's phases: reduce-scatter then all-gather, every chunk cut into segments
// that are striped over the K connections to our successor and pipelined hop by hop. An all-reduce
// runs every phase; the other collectives run a window of them (docs/algorithms.md §1a):
//   reduce-scatter  phases 0..N-2 (rank r ends with the reduction of block r, in its own output)
//   all-gather      phases N-1..2N-3, every rank starting with its own block (its input)
//   broadcast       phases N-1..2N-3 with one block, the root's: pipelined along the ring from the root
// For those three the blocks are the user's: block r (owned by rank r) is the ring's chunk r+1, which
// rank r finishes at phase N-2 and sends first at phase N-1.
//
//   phase 0              send our own chunk (from the input) segment by segment
//   reduce phase p       receive a segment of chunk c straight into the output, combine it with our
//                        input (the owner's last hop also finalises avg), forward it as phase p+1
//   all-gather phase p   receive a finished segment straight into the output, forward it (but the last)
//
// A segment moves on as soon as it arrives, so receiving, reducing and sending overlap and phase p+1
// starts long before phase p ends. Each element's final value is computed once, by its chunk's owner,
// and then copied as bytes: every peer ends with identical bits.
//
// Coded operations (quantized and/or zstd-compressed) keep every segment's wire bytes in a slot of
// `spec.wire` (wireRegionBytes()): a segment is received into its slot, decoded (and combined with
// our input, in full precision) into the output, re-encoded into the same slot and sent from there;
// all-gather segments are forwarded from their slot as received. The owner of a chunk encodes the
// final value once and adopts the decoded value itself, so every peer decodes the same bytes.
// Integer avg is coded too: its reduce-scatter carries exact partial sums, 8 or 16 bytes per element, and the owner
// divides once (codec/partial_sum.hpp), and its all-gather
// carries the elements.
// Device buffers (spec.device): input and output live on the GPU; the slots are pinned host memory
// mirrored by spec.device_wire on the GPU. Each segment's codec work becomes a job on the engine's
// worker (upload the received bytes, decode/combine/encode on the GPU, download the new wire bytes,
// zstd), whose completion comes back to the io thread and sends the segment on. All-gather segments
// are forwarded at once and decoded on the GPU meanwhile. Only wire bytes cross PCIe.
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_RING_COLLECTIVE_HPP_
#define PCCL_COLLECTIVE_RING_COLLECTIVE_HPP_

#include <cstdint>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <vector>

#include "codec/compress.hpp"
#include "codec/dtype.hpp"
#include "codec/gpu/engine.hpp"
#include "codec/partial_sum.hpp"
#include "collective/partition.hpp"
#include "collective/ring_op.hpp"
#include "collective/striper.hpp"
#include "net/data_channel.hpp"
#include "pccl/status.hpp"

namespace pccl::collective {

struct RingOpSpec {
  wire::Collective kind = wire::Collective::kAllReduce;  // not kBarrier (no data)
  uint32_t root = 0;   // broadcast: the root's rank
  uint64_t op_id = 0;  // the tag
  uint32_t seq = 0;    // the call's number for the tag (with the epoch, names the operation)
  wire::OpDesc desc;   // carried in every data header
  // All-reduce: count elements each. Reduce-scatter: input count, output count / world (our block),
  // scratch count (the blocks passing through). All-gather: input count / world (our block), output
  // count. Broadcast: output count; input count on the root (unused elsewhere).
  const uint8_t* input = nullptr;  // never written
  uint8_t* output = nullptr;       // must not overlap input
  uint8_t* scratch = nullptr;      // reduce-scatter only
  size_t count = 0;                // the ring layout's elements (OpDesc::count)
  codec::DType dtype = codec::DType::kFloat32;
  codec::RedOp op = codec::RedOp::kSum;
  uint32_t rank = 0;   // our index in the group's ring
  uint32_t world = 2;  // >= 2
  size_t segment_elems = 1;
  codec::Quant quant = codec::Quant::kNone;
  int compress = 0;                           // zstd level, 0 = off
  codec::Compressor* compressor = nullptr;    // with compress: the io thread's contexts
  uint8_t* wire = nullptr;                    // coded: wireRegionBytes(spec) bytes (pinned with device)
  codec::gpu::Engine* device = nullptr;       // input/output are device memory of this engine
  uint8_t* device_wire = nullptr;             // device: wireRegionBytes(spec) bytes on the GPU
  std::function<void(std::function<void()>)> post;  // device: runs a job's completion on the io thread
  // Set by a composite of rings (two_level_allreduce.hpp); the defaults are the plain ring's.
  std::vector<Span> blocks;  // reduce-scatter / all-gather: block b (owned by rank b); empty: chunkOf
  uint32_t phase_base = 0;   // added to the phase of every frame we send (the composite's part)
  uint32_t avg_divisor = 0;  // avg: the owner divides by this (0: world)
  uint64_t eager_bytes = wire::kEagerBytes;  // sent before the successor's hello, at most
  // Integer avg: the reduce-scatter carries exact partial sums (codec/partial_sum.hpp).
  uint32_t divisor() const { return avg_divisor != 0 ? avg_divisor : world; }
  bool partialSums() const { return reduces() && codec::hasPartialSums(dtype, op); }
  bool reduces() const { return kind == wire::Collective::kAllReduce || kind == wire::Collective::kReduceScatter; }
  bool coded() const {
    return quant != codec::Quant::kNone || compress > 0 || device != nullptr || partialSums();
  }
};

// Bytes of the slot region a coded operation needs (0 when not coded).
size_t wireRegionBytes(const RingOpSpec& spec);
// Bytes (before zstd) of a segment of `count` elements sent or received at `phase`: integer avg's
// reduce-scatter carries partial sums, everything else the operation's wire format.
size_t phaseBytes(const RingOpSpec& spec, uint32_t phase, size_t count);

class RingCollective : public RingOp {
 public:
  using Channels = std::vector<std::shared_ptr<net::DataChannel>>;

  // `successor` stripes our frames over the K connections we send on. `finished` runs once: OK when
  // every segment has been received and every send has completed (the buffers are free), or the first
  // failure.
  RingCollective(const RingOpSpec& spec, std::shared_ptr<Striper> successor, Finished finished);

  void start() override;
  // The successor's hello arrived (it called the operation too): segments held back by the eager
  // limit (wire::kEagerBytes before the hello) go out.
  void successorReady() override;
  // Checks the phase, offset and length of the frame.
  Result<uint8_t*> placement(const wire::DataHeader& h, uint32_t bytes) override;
  // Reduce and forward. An error (a corrupted coded payload) fails the operation.
  Status delivered(const wire::DataHeader& h, uint32_t bytes) override;
  void withdraw(uint32_t from, const wire::DataHeader& h) override;

 protected:
  bool complete() const override;
  // Device jobs not yet started are dropped and a running one is waited for.
  void stopWork() override;

 private:
  Span chunk(uint32_t index) const { return chunks_[index]; }
  size_t segmentsOf(uint32_t chunk_index) const;
  // Where element `at` (of the chunk) of chunk `c` is read from (our input) and lands (the output).
  const uint8_t* inputAt(uint32_t c, size_t at) const;
  uint8_t* outputAt(uint32_t c, size_t at) const;
  bool inWindow(uint32_t phase) const { return phase >= first_phase_ && phase < end_phase_; }
  void startGather();  // all-gather and broadcast: our block goes out first
  void sendSegment(uint32_t phase, size_t segment);
  // Coded operations.
  size_t slotIndex(uint32_t chunk_index, size_t segment) const { return first_seg_[chunk_index] + segment; }
  uint8_t* slot(size_t index) const { return spec_.wire + index * slot_cap_; }
  Status encodeSlot(size_t index, const uint8_t* src, size_t count, uint8_t* adopt_into);
  Status encodeInput(size_t index, const uint8_t* src, size_t count);
  Status compressSlot(size_t index, size_t raw);
  Status reducePartials(size_t index, const uint8_t* raw, const uint8_t* in, uint8_t* out, size_t count, bool last,
                        bool forward);
  Status deliveredCoded(const wire::DataHeader& h, uint32_t bytes);
  // Device buffers (ring_device.cpp): one segment's codec work, a job on the engine's worker.
  struct DeviceStep {
    enum Kind {
      kEncodeInput,  // phase 0 of a reducing collective: our input segment to wire bytes
      kOwnBlock,     // all-gather / broadcast: our block's segment to the output (and wire bytes)
      kReduce,       // a reduce phase: decode + combine with our input (+ encode for the next hop)
      kGather,       // an all-gather phase: the received segment (already forwarded) into the output
    };
    Kind kind = kEncodeInput;
    uint32_t phase = 0;       // kReduce / kGather: the phase it arrived in
    uint32_t send_phase = 0;  // the phase its wire bytes leave in (with `forward`)
    size_t segment = 0;
    size_t index = 0;         // its slot
    const uint8_t* in = nullptr;  // device addresses of the segment in our input and the output
    uint8_t* out = nullptr;       // (a reduce-scatter's blocks passing through: the device scratch)
    size_t count = 0;
    uint32_t rx_bytes = 0;  // what arrived in the slot, and its flags
    uint32_t rx_flags = 0;
    bool forward = true;    // wire bytes are downloaded and sent at send_phase
    bool last = false;      // the owner's last reduce hop (finalises avg; forwarding, it adopts)
    uint32_t divisor = 1;
  };
  struct DeviceJobs {  // shared with the engine's worker
    std::mutex mu;
    std::condition_variable cv;
    size_t running = 0;  // submitted and not yet finished on the worker
    std::atomic<bool> cancelled{false};
  };
  void submitDevice(const DeviceStep& step);
  static Status runDeviceStep(const RingOpSpec& spec, size_t slot_cap, const DeviceStep& step,
                              codec::gpu::JobContext& ctx, uint32_t* len, uint32_t* flags);
  static Status runDeviceKernels(const RingOpSpec& spec, const DeviceStep& step, codec::gpu::JobContext& ctx,
                                 uint8_t* dslot, const uint8_t** down);
  void deviceDone(const DeviceStep& step, const Status& st, uint32_t len, uint32_t flags);
  void quiesce();

  RingOpSpec spec_;
  std::shared_ptr<Striper> successor_;
  size_t elem_ = 1;
  uint32_t first_phase_ = 0, end_phase_ = 0;  // the phases this collective runs: [first, end)
  std::vector<Span> chunks_;                  // the ring's chunks, in the ring layout
  std::vector<size_t> first_slot_;  // per phase of the window: index of its first segment in received_
  std::vector<uint8_t> received_;   // one flag per (phase, segment) we receive
  size_t recv_expected_ = 0, recv_done_ = 0;
  size_t send_expected_ = 0;
  // Eager limit: until the successor's hello, at most wire::kEagerBytes leave; the rest wait here.
  bool successor_ready_ = false;
  uint64_t eager_sent_ = 0;
  std::vector<std::pair<uint32_t, size_t>> held_;  // (phase, segment)
  // Coded operations: per chunk its first slot; per slot the bytes it holds and their flags.
  std::vector<size_t> first_seg_;
  size_t slot_cap_ = 0;
  std::vector<uint32_t> slot_len_;
  std::vector<uint32_t> slot_flags_;
  std::vector<uint8_t> raw_;  // a decompressed segment
  std::shared_ptr<DeviceJobs> jobs_ = std::make_shared<DeviceJobs>();
  size_t jobs_open_ = 0;  // device jobs whose completion has not come back to the io thread
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_RING_COLLECTIVE_HPP_
