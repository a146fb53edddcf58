#include "collective/striper.hpp"

#include <utility>

namespace pccl::collective {

Striper::~Striper() {
  for (auto& ch : channels_) ch->setOnIdle(nullptr);
  failAll(Status::peerLost("the ring was replaced"));
}

void Striper::attach() {
  std::weak_ptr<Striper> weak = weak_from_this();
  for (auto& ch : channels_) {
    ch->setOnIdle([weak] {
      if (auto self = weak.lock()) self->pump();
    });
  }
}

void Striper::send(const wire::DataHeader& h, const uint8_t* payload, uint32_t bytes,
                   net::DataChannel::SendDone done) {
  queue_.push_back(Frame{h, payload, bytes, std::move(done)});
  pump();
}

void Striper::pump() {
  if (pumping_) return;  // a send below completing at once calls back here: the loop goes on
  pumping_ = true;
  const size_t k = channels_.size();
  bool open = false;
  for (size_t tried = 0; tried < k && !queue_.empty();) {
    auto& ch = channels_[next_];
    next_ = (next_ + 1) % k;
    open = open || ch->isOpen();
    if (!ch->isOpen() || !ch->idle()) {
      ++tried;
      continue;
    }
    Frame f = std::move(queue_.front());
    queue_.pop_front();
    ch->send(f.h, f.payload, f.bytes, std::move(f.done));
    tried = 0;  // that connection is busy now; look again at all the others
  }
  pumping_ = false;
  if (!open && !queue_.empty()) failAll(Status::peerLost("every ring connection to the successor is closed"));
}

size_t Striper::cancel(uint64_t op_id, uint32_t seq, const Status& why) {
  std::vector<Frame> taken;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->h.op_id == op_id && it->h.seq == seq) {
      taken.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  size_t n = taken.size();
  for (auto& f : taken) f.done(why);
  for (auto& ch : channels_) n += ch->cancelQueued(op_id, seq, why);
  return n;
}

void Striper::failAll(const Status& why) {
  std::deque<Frame> taken = std::move(queue_);
  queue_.clear();
  for (auto& f : taken) f.done(why);
}

}  // namespace pccl::collective
