// One all-reduce on the ring: reduce-scatter then all-gather, every chunk cut into segments that are
// striped over the K connections to our successor and pipelined hop by hop.
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
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_RING_ALLREDUCE_HPP_
#define PCCL_COLLECTIVE_RING_ALLREDUCE_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "codec/compress.hpp"
#include "codec/dtype.hpp"
#include "collective/partition.hpp"
#include "net/data_channel.hpp"
#include "pccl/status.hpp"

namespace pccl::collective {

struct RingOpSpec {
  uint64_t op_id = 0;
  const uint8_t* input = nullptr;  // never written
  uint8_t* output = nullptr;       // must not overlap input
  size_t count = 0;
  codec::DType dtype = codec::DType::kFloat32;
  codec::RedOp op = codec::RedOp::kSum;
  uint32_t rank = 0;   // our index in the group's ring
  uint32_t world = 2;  // >= 2
  size_t segment_elems = 1;
  codec::Quant quant = codec::Quant::kNone;
  int compress = 0;                           // zstd level, 0 = off
  codec::Compressor* compressor = nullptr;    // with compress: the io thread's contexts
  uint8_t* wire = nullptr;                    // coded: wireRegionBytes(spec) bytes
  bool coded() const { return quant != codec::Quant::kNone || compress > 0; }
};

// Bytes of the slot region a coded operation needs (0 when not coded).
size_t wireRegionBytes(const RingOpSpec& spec);

class RingAllReduce : public std::enable_shared_from_this<RingAllReduce> {
 public:
  using Channels = std::vector<std::shared_ptr<net::DataChannel>>;
  using Finished = std::function<void(const Status&)>;

  // `successor` holds the K connections we send on. `finished` runs once: OK when every segment has
  // been received and every send has completed (the buffers are free), or the first failure.
  RingAllReduce(const RingOpSpec& spec, Channels successor, Finished finished);

  void start();
  // Where the payload of an incoming frame of this operation goes, after checking that the frame is
  // one we expect (phase, offset, length) and have not had yet.
  Result<uint8_t*> placement(const wire::DataHeader& h, uint32_t bytes);
  // The payload (`bytes`) has landed at placement(h): reduce and forward. An error (a corrupted coded
  // payload) fails the operation.
  Status delivered(const wire::DataHeader& h, uint32_t bytes);
  void fail(const Status& why);  // no more sends are issued; `finished` runs (if it has not)

  uint64_t bytesSent() const { return bytes_sent_; }
  uint64_t bytesReceived() const { return bytes_received_; }

 private:
  Span chunk(uint32_t index) const { return chunkOf(spec_.count, spec_.world, index); }
  size_t segmentsOf(uint32_t chunk_index) const;
  void sendSegment(uint32_t phase, size_t segment);
  std::shared_ptr<net::DataChannel>& pickConnection(size_t segment);
  void maybeFinish();
  // Coded operations.
  size_t slotIndex(uint32_t chunk_index, size_t segment) const { return first_seg_[chunk_index] + segment; }
  uint8_t* slot(size_t index) const { return spec_.wire + index * slot_cap_; }
  Status encodeSlot(size_t index, const uint8_t* src, size_t count, uint8_t* adopt_into);
  Status deliveredCoded(const wire::DataHeader& h, uint32_t bytes);

  RingOpSpec spec_;
  Channels successor_;
  Finished finished_;
  size_t elem_ = 1;
  std::vector<size_t> first_slot_;  // per phase: index of its first segment in received_
  std::vector<uint8_t> received_;   // one flag per (phase, segment) we receive
  size_t recv_expected_ = 0, recv_done_ = 0;
  size_t send_expected_ = 0, send_done_ = 0;
  uint64_t bytes_sent_ = 0, bytes_received_ = 0;
  bool over_ = false;
  // Coded operations: per chunk its first slot; per slot the bytes it holds and their flags.
  std::vector<size_t> first_seg_;
  size_t slot_cap_ = 0;
  std::vector<uint32_t> slot_len_;
  std::vector<uint32_t> slot_flags_;
  std::vector<uint8_t> raw_;  // a decompressed segment
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_RING_ALLREDUCE_HPP_
