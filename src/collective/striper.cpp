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
    const size_t best = pick(queue_.front().bytes, &open);
    if (best == channels_.size()) break;
    Frame f = std::move(queue_.front());
    queue_.pop_front();
    used_[best] = ++clock_;
    channels_[best]->send(f.h, f.payload, f.bytes, std::move(f.done), f.region);
  }
  pumping_ = false;
  if (!open && !queue_.empty()) failAll(Status::peerLost("every ring connection to the successor is closed"));
}

size_t Striper::pick(uint32_t bytes, bool* open) const {
  const size_t none = channels_.size();
  size_t idle = none, count = 0;
  *open = false;
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (!channels_[i]->isOpen()) continue;
    *open = true;
    if (!channels_[i]->idle()) continue;
    ++count;
    if (idle == none || used_[i] > used_[idle]) idle = i;
  }
  if (count <= 1) return idle;
  // The frame's header and a margin besides its payload.
  const int64_t need = static_cast<int64_t>(bytes) + 256;
  size_t fits = none, roomiest = none;
  int64_t most = -1;
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (!channels_[i]->isOpen() || !channels_[i]->idle()) continue;
    const int64_t room = channels_[i]->sendRoom();
    if (room >= need && (fits == none || used_[i] > used_[fits])) fits = i;
    if (room > most || (room == most && used_[i] > used_[roomiest])) {
      most = room;
      roomiest = i;
    }
  }
  return fits != none ? fits : roomiest;
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
