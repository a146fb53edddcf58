#include "collective/op_book.hpp"

#include <fmt/format.h>

#include <algorithm>


namespace pccl::collective {

std::string describeKey(const OpKey& k) { return fmt::format("tag {} (call {} of it on epoch {})", k.tag, k.seq, k.epoch); }

std::optional<Status> OpHistory::find(const OpKey& k) const {
  auto it = ended_.find(k);
  if (it == ended_.end()) return std::nullopt;
  return it->second;
}

void OpHistory::put(const OpKey& k, const Status& s) {
  auto it = ended_.find(k);
  if (it != ended_.end()) {
    it->second = s;
    return;
  }
  ended_.emplace(k, s);
  order_.push_back(k);
  while (order_.size() > capacity_) {
    ended_.erase(order_.front());
    order_.pop_front();
  }
}

Result<uint8_t*> EarlyFrames::add(const OpKey& k, const wire::DataHeader& h, uint32_t bytes, const void* channel,
                                  uint32_t sender) {
  Slot& slot = slots_[k];
  uint64_t& from = slot.by_sender[sender];
  if (from + bytes > wire::kEagerBytes) {
    return Status::protocol(fmt::format("a neighbour sent more than {} bytes of {} before this peer called it",
                                        wire::kEagerBytes, describeKey(k)));
  }
  from += bytes;
  slot.eager += bytes;
  total_ += bytes;
  slot.frames.push_back(Frame{h, std::vector<uint8_t>(bytes), channel, false, false, sender});
  auto f = std::prev(slot.frames.end());
  reading_[channel] = {k, f};
  return f->payload.data();
}

void EarlyFrames::release(std::map<OpKey, Slot>::iterator it, std::list<Frame>::iterator f) {
  total_ -= f->payload.size();
  it->second.frames.erase(f);
}

std::optional<OpKey> EarlyFrames::delivered(const void* channel) {
  auto r = reading_.find(channel);
  if (r == reading_.end()) return std::nullopt;
  const OpKey k = r->second.first;
  auto f = r->second.second;
  reading_.erase(r);
  auto it = slots_.find(k);
  if (f->orphan) {
    release(it, f);
    if (it->second.frames.empty() && it->second.eager == 0) slots_.erase(it);
    return std::nullopt;
  }
  f->complete = true;
  return k;
}

void EarlyFrames::channelClosed(const void* channel) {
  auto r = reading_.find(channel);
  if (r == reading_.end()) return;
  auto it = slots_.find(r->second.first);
  release(it, r->second.second);
  reading_.erase(r);
  if (it->second.frames.empty() && it->second.eager == 0) slots_.erase(it);
}

void EarlyFrames::abandoned(const void* channel) {
  auto r = reading_.find(channel);
  if (r == reading_.end()) return;
  auto it = slots_.find(r->second.first);
  const auto& f = *r->second.second;
  if (!f.orphan) {
    const uint64_t bytes = f.payload.size();
    uint64_t& from = it->second.by_sender[f.sender];
    from -= std::min<uint64_t>(from, bytes);
    it->second.eager -= std::min<uint64_t>(it->second.eager, bytes);
  }
  channelClosed(channel);
}

std::vector<EarlyFrames::Frame> EarlyFrames::takeComplete(const OpKey& k) {
  std::vector<Frame> out;
  auto it = slots_.find(k);
  if (it == slots_.end()) return out;
  auto& frames = it->second.frames;
  for (auto f = frames.begin(); f != frames.end();) {
    if (!f->complete) {
      ++f;
      continue;
    }
    total_ -= f->payload.size();
    out.push_back(std::move(*f));
    f = frames.erase(f);
  }
  return out;
}

std::vector<std::pair<uint32_t, wire::OpDesc>> EarlyFrames::takeHellos(const OpKey& k) {
  auto it = hellos_.find(k);
  if (it == hellos_.end()) return {};
  auto out = std::move(it->second);
  hellos_.erase(it);
  return out;
}

void EarlyFrames::drop(const OpKey& k) {
  hellos_.erase(k);
  auto it = slots_.find(k);
  if (it == slots_.end()) return;
  auto& frames = it->second.frames;
  for (auto f = frames.begin(); f != frames.end();) {
    if (f->complete) {
      total_ -= f->payload.size();
      f = frames.erase(f);
    } else {
      f->orphan = true;
      ++f;
    }
  }
  it->second.eager = 0;
  it->second.by_sender.clear();
  if (frames.empty()) slots_.erase(it);
}

void EarlyFrames::clear() {
  std::vector<OpKey> keys;
  for (const auto& kv : slots_) keys.push_back(kv.first);
  for (const OpKey& k : keys) drop(k);
  hellos_.clear();
}

}  // namespace pccl::collective
