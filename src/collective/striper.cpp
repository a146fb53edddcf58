#include "collective/striper.hpp"

#include <algorithm>
#include <utility>

#include "util/log.hpp"

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

void Striper::setTuner(std::shared_ptr<ConnectionTuner> tuner, OnTuned on_change) {
  tuner_ = std::move(tuner);
  on_tuned_ = std::move(on_change);
  if (tuner_ && tuner_->pool() != channels_.size()) tuner_->setPool(static_cast<uint32_t>(channels_.size()));
}

bool Striper::tuned() const { return tuner_ != nullptr && !channels_.empty() && !channels_.front()->lending(); }

uint32_t Striper::active() const {
  const auto all = static_cast<uint32_t>(channels_.size());
  return tuned() ? std::min(tuner_->active(), all) : all;
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
  // A broken connection (waiting for its replacement, net/data_channel.hpp) lends its turn to the next.
  size_t n = active();
  for (size_t i = 0; i < n && n < channels_.size(); ++i) n += channels_[i]->broken() ? 1 : 0;
  while (!queue_.empty()) {
    size_t best = pick(n, queue_.front().bytes, &open);
    // None of the active connections is open: any other may carry the frame.
    if (!open && n < channels_.size()) best = pick(channels_.size(), queue_.front().bytes, &open);
    if (best == channels_.size()) break;
    Frame f = std::move(queue_.front());
    queue_.pop_front();
    used_[best] = ++clock_;
    channels_[best]->send(f.h, f.payload, f.bytes, std::move(f.done), f.region);
  }
  pumping_ = false;
  if (!open && !queue_.empty()) failAll(Status::peerLost("every ring connection to the successor is closed"));
  if (tuner_ != nullptr) account();
}

size_t Striper::pick(size_t n, uint32_t bytes, bool* open) const {
  const size_t none = channels_.size();
  size_t idle = none, count = 0;
  *open = false;
  for (size_t i = 0; i < n; ++i) {
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
  for (size_t i = 0; i < n; ++i) {
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

void Striper::account() {
  if (!tuned()) return;
  const TimePoint now = Clock::now();
  if (!baseline_) {
    sample(now);  // starts the first sample
    return;
  }
  if (waiting_) waited_us_ += std::chrono::duration_cast<std::chrono::microseconds>(now - mark_).count();
  mark_ = now;
  waiting_ = !queue_.empty();
  if (now - sample_start_ >= std::chrono::microseconds(interval_us_)) sample(now);
}

void Striper::sample(TimePoint now) {
  TunerSample s;
  s.seconds = std::chrono::duration<double>(now - sample_start_).count();
  s.busy = s.seconds > 0 ? static_cast<double>(waited_us_) / 1e6 / s.seconds : 0;
  bool valid = baseline_;
  uint64_t srtt_sum = 0, srtt_n = 0;
  uint32_t min_rtt = 0;
  size_t carried = 0, warming = 0;  // active connections that carried data; of them, before their first loss
  const size_t n = active();
  acked_.resize(channels_.size(), 0);
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (!channels_[i]->isOpen()) continue;  // gone: carries nothing more
    net::TcpWindow w;
    if (!channels_[i]->tcpWindow(&w) || !w.has_bytes_acked) {
      valid = false;  // broken (resuming), or a kernel that does not say
      acked_[i] = 0;
      continue;
    }
    if (w.bytes_acked < acked_[i]) valid = false;  // a new socket after a resume: its count restarts
    else s.bytes += w.bytes_acked - acked_[i];
    acked_[i] = w.bytes_acked;
    if (i < n && w.srtt_us > 0) {
      srtt_sum += w.srtt_us;
      ++srtt_n;
    }
    if (w.min_rtt_us > 0 && (min_rtt == 0 || w.min_rtt_us < min_rtt)) min_rtt = w.min_rtt_us;
    if (i < n && w.bytes_acked > 0) {
      ++carried;
      warming += w.ssthresh >= net::kNoSsthresh ? 1 : 0;
    }
  }
  s.srtt_us = srtt_n > 0 ? static_cast<uint32_t>(srtt_sum / srtt_n) : 0;
  s.min_rtt_us = min_rtt;
  s.warming = carried > 0 && warming == carried;  // the link's first slow start: no loss anywhere yet
  if (valid) {
    PCCL_LOG_TRACE("collective", "{}: sample over {:.0f} ms: busy {:.2f}, {:.2f} MB/s, srtt {} us, min rtt {} us, {} active{}",
                   channels_.front()->name(), s.seconds * 1e3, s.busy, s.bytes / s.seconds / 1e6, s.srtt_us, s.min_rtt_us,
                   active(), s.warming ? " (first slow start)" : "");
    if (tuner_->add(s) && on_tuned_) on_tuned_(active());
  }
  interval_us_ = ConnectionTuner::intervalUs(s.srtt_us);
  baseline_ = true;
  sample_start_ = now;
  mark_ = now;
  waited_us_ = 0;
  waiting_ = !queue_.empty();
}

}  // namespace pccl::collective
