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
                   net::DataChannel::SendDone done, const wire::LendRegion& region) {
  queue_.push_back(Frame{h, payload, bytes, std::move(done), region});
  pump();
}

void Striper::pump() {
  if (pumping_) return;  // a send below completing at once calls back here: the loop goes on
  pumping_ = true;
  bool open = false;
  while (!queue_.empty()) {
    // The idle connection used most recently: small operations stay on a few connections whose
    // congestion windows have grown, instead of waking every cold one (each restarts from the initial
    // window after an idle period); a large operation keeps every connection busy anyway.
    size_t best = channels_.size();
    open = false;
    for (size_t i = 0; i < channels_.size(); ++i) {
      const auto& ch = channels_[i];
      if (!ch->isOpen()) continue;
      open = true;
      if (ch->idle() && (best == channels_.size() || used_[i] > used_[best])) best = i;
    }
    if (best == channels_.size()) break;
    Frame f = std::move(queue_.front());
    queue_.pop_front();
    used_[best] = ++clock_;
    channels_[best]->send(f.h, f.payload, f.bytes, std::move(f.done), f.region);
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

void Striper::retireLending(uint64_t op_id, uint32_t seq) {
  for (auto& ch : channels_) ch->retireLending(op_id, seq);
}

void Striper::failAll(const Status& why) {
  std::deque<Frame> taken = std::move(queue_);
  queue_.clear();
  for (auto& f : taken) f.done(why);
}

}  // namespace pccl::collective
