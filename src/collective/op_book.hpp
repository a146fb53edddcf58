// What a peer remembers about all-reduces besides the ones running: how recent ones ended (so that a
// late frame, a late abort or the master's question about one gets the right answer), and what the
// predecessor sent for calls this peer has not made yet (data within the eager limit, and the
// successor's hello). Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_OP_BOOK_HPP_
#define PCCL_COLLECTIVE_OP_BOOK_HPP_

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pccl/status.hpp"
#include "wire/data.hpp"

namespace pccl::collective {

// One call of an all-reduce: the ring's epoch, the tag, and the call's number for that tag.
struct OpKey {
  uint64_t epoch = 0;
  uint64_t tag = 0;
  uint32_t seq = 0;
  bool operator<(const OpKey& o) const { return std::tie(epoch, tag, seq) < std::tie(o.epoch, o.tag, o.seq); }
  bool operator==(const OpKey& o) const { return epoch == o.epoch && tag == o.tag && seq == o.seq; }
};
std::string describeKey(const OpKey& k);

// How operations ended here, the most recent `capacity` of them.
class OpHistory {
 public:
  explicit OpHistory(size_t capacity = 8192) : capacity_(capacity) {}
  void committed(const OpKey& k) { put(k, Status::ok()); }
  void failed(const OpKey& k, const Status& why) { put(k, why.isOk() ? Status::internal("failed") : why); }
  // OK: committed; an error: failed with it; nullopt: not known.
  std::optional<Status> find(const OpKey& k) const;

 private:
  void put(const OpKey& k, const Status& s);
  size_t capacity_;
  std::map<OpKey, Status> ended_;
  std::deque<OpKey> order_;
};

// Frames that arrived for calls this peer has not made yet. The predecessor may send at most
// wire::kEagerBytes of an operation before our hello reached it, so the bytes kept per call are
// bounded. A payload is read into its buffer asynchronously: a buffer being read is never freed until
// its channel delivered it or closed.
class EarlyFrames {
 public:
  struct Frame {
    wire::DataHeader header;
    std::vector<uint8_t> payload;
    const void* channel = nullptr;
    bool complete = false;
    bool orphan = false;  // its call ended before it arrived: freed once read
    uint32_t sender = 0;
  };
  // Space for the payload of a data frame arriving on `channel` from group rank `sender`; an error past
  // the eager limit (per sender: a two-level call has several, docs/algorithms.md §12).
  Result<uint8_t*> add(const OpKey& k, const wire::DataHeader& h, uint32_t bytes, const void* channel,
                       uint32_t sender = 0);
  // `channel` finished reading the payload it was given space for (if it was given any): its key.
  std::optional<OpKey> delivered(const void* channel);
  void channelClosed(const void* channel);
  // `channel` will not finish the payload it is reading (its connection broke and resumes): the space
  // goes, and its bytes no longer count against the eager limit (the frame comes again).
  void abandoned(const void* channel);
  // The hello of group rank `from` (the successor, or a two-level sender's).
  void hello(const OpKey& k, const wire::OpDesc& desc, uint32_t from) { hellos_[k].emplace_back(from, desc); }
  // Hands over (and forgets) the frames of k read completely so far.
  std::vector<Frame> takeComplete(const OpKey& k);
  std::vector<std::pair<uint32_t, wire::OpDesc>> takeHellos(const OpKey& k);
  void drop(const OpKey& k);  // the call ended: what came for it goes
  void clear();               // a new ring
  size_t bytes() const { return total_; }

 private:
  struct Slot {
    std::list<Frame> frames;
    uint64_t eager = 0;  // payload bytes received for the call so far
    std::map<uint32_t, uint64_t> by_sender;  // ... from each sender
  };
  void release(std::map<OpKey, Slot>::iterator it, std::list<Frame>::iterator f);
  std::map<OpKey, Slot> slots_;
  std::map<const void*, std::pair<OpKey, std::list<Frame>::iterator>> reading_;
  std::map<OpKey, std::vector<std::pair<uint32_t, wire::OpDesc>>> hellos_;
  uint64_t total_ = 0;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_OP_BOOK_HPP_
