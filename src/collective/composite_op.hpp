// One call made of several rings (docs/algorithms.md §12): each *part* is a RingOp of its own (a
// RingCollective or a GatherAllReduce) on a ring of some of the group's members, and the composite is
// what Collectives drives. It keeps what every composite shares:
//
//   frames      a frame's phase carries its part (part << kPartShift | the part's own phase); a frame
//               is accepted only from the part's ring predecessor (or its successor too, for a part
//               that gathers both ways) and handed to the part with the part's own phase
//   early       frames of a part that has not started are placed where they belong (the part and its
//               buffers are made then) and delivered when it starts
//   hellos      a member's hello reaches every part that sends to it (readyFrom)
//   the end     the call ends when every part has ended; the first failure of a part fails it all;
//               quiet when every part and the composite are
//
// What parts there are, and when each starts, is the subclass's (two_level_allreduce.hpp,
// two_level_gather.hpp): it adds them in its constructor, each with a function that makes its RingOp
// (called once, when the part is first needed), starts them, and hears when one has finished.
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_COMPOSITE_OP_HPP_
#define PCCL_COLLECTIVE_COMPOSITE_OP_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "collective/buffer_pool.hpp"
#include "collective/ring_collective.hpp"

namespace pccl::collective {

inline constexpr uint32_t kPartShift = 16;

class CompositeOp : public RingOp {
 public:
  using StriperTo = std::function<std::shared_ptr<Striper>(uint32_t group_rank)>;
  ~CompositeOp() override;

  void successorReady() override;  // the flat ring's successor: readyFrom(its rank)
  void readyFrom(uint32_t rank) override;
  Result<uint8_t*> placement(const wire::DataHeader& h, uint32_t bytes) override;
  Result<uint8_t*> placementFrom(uint32_t from, const wire::DataHeader& h, uint32_t bytes) override;
  void withdraw(uint32_t from, const wire::DataHeader& h) override;
  Status delivered(const wire::DataHeader& h, uint32_t bytes) override;
  void whenQuiet(std::function<void()> quiet) override;
  size_t sendsInFlight() const override;  // every part's
  uint64_t bytesSent() const override;
  uint64_t bytesReceived() const override;
  std::vector<uint32_t> helloTo() const override { return hello_to_; }
  // `spec` on the LAN level of a two-level call: full precision, no zstd, avg summing (the WAN level
  // divides by the group's size).
  static RingOpSpec lanLevel(RingOpSpec spec);
  // The stripers to `ranks` (for the constructor's `stripers`).
  static std::vector<std::shared_ptr<Striper>> stripersTo(const std::vector<uint32_t>& ranks, const StriperTo& to);

 protected:
  struct Part;
  using Make = std::function<std::shared_ptr<RingOp>(Part&)>;
  struct Part {
    uint32_t id = 0;    // the part of its frames' phase
    uint32_t group = 0;  // the subclass's (a wave)
    int kind = 0;        // the subclass's
    uint32_t pred = 0, succ = 0;  // group ranks on its ring
    bool both_ways = false;       // takes frames from `succ` too (a gather)
    Make make;
    std::shared_ptr<RingOp> op;  // made when first needed
    bool started = false, finished = false, ready = false;
    std::vector<std::pair<wire::DataHeader, uint32_t>> deferred;  // delivered before it started
  };

  // `stripers`: every striper a part sends on (the call's frames are taken back from them).
  CompositeOp(const RingOpSpec& base, std::vector<std::shared_ptr<Striper>> stripers, BufferPool* buffers,
              Finished finished);

  // Only in the subclass's constructor (parts_ does not move after it).
  Part& addPart(uint32_t id, uint32_t group, int kind, uint32_t pred, uint32_t succ, Make make);
  // A part that is one RingCollective of `spec` (its phase_base set here, its wire slots reserved)
  // sending on `striper`; before its successor's hello it sends at most eagerShareTo(succ).
  Part& addRing(uint32_t id, uint32_t group, int kind, RingOpSpec spec, uint32_t pred, uint32_t succ,
                std::shared_ptr<Striper> striper);
  // The eager limit shared equally by our parts sending to `succ` (once every part is added).
  uint64_t eagerShareTo(uint32_t succ) const;
  void helloFrom(uint32_t rank);  // a part sends `rank` more than the eager limit before its hello
  Part* find(uint32_t id);
  Part* find(uint32_t group, int kind);
  void startPart(Part& p);  // makes it if needed, starts it, hands it its early frames
  // The call's own memory. A same-host successor is lent our payloads from the call's regions alone
  // (the input, the output, the buffers taken with own() and the wire buffer: net/lending.hpp), so a
  // call announces the same few regions on a connection whatever its waves and parts, within the 8
  // per operation a receiver keeps: a subclass takes at most five buffers with own().
  uint8_t* own(size_t bytes);  // from the pool, released with the composite
  // Wire slots of `bytes` for a part (only in the subclass's constructor): the offset of its span in
  // the call's one wire buffer, taken from the pool when a part first needs it (wireAt()).
  size_t reserveWire(size_t bytes);
  size_t reserveWire(const RingOpSpec& spec) { return spec.coded() ? reserveWire(wireRegionBytes(spec)) : kNoWire; }
  uint8_t* wireAt(size_t at);  // nullptr for kNoWire
  static constexpr size_t kNoWire = ~size_t{0};
  // A part's RingOp ends with this (the composite's partFinished, or its failure).
  RingOp::Finished partDone(uint32_t id);
  virtual void partFinished(Part& p) = 0;  // `p` ended well; start what waited for it
  bool complete() const override;
  void stopWork() override;

  RingOpSpec base_;
  BufferPool* buffers_;
  std::vector<Part> parts_;

 private:
  void ensure(Part& p);
  static wire::DataHeader local(const wire::DataHeader& h);
  void ownRegion(const uint8_t* base, size_t bytes);
  std::vector<uint32_t> hello_to_;
  std::vector<BufferPool::Buffer> own_;  // own()
  BufferPool::Buffer wire_;              // every part's wire slots (reserveWire())
  size_t wire_bytes_ = 0;
  std::vector<wire::LendRegion> regions_;  // every buffer of the call a payload may be lent from
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_COMPOSITE_OP_HPP_
