#include "engine.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <utility>

namespace pccl::sim {

Engine::Engine(uint32_t peers, EngineParams params, LinkFn link_fn, const void* link_ctx)
    : peers_(peers), params_(params), link_fn_(link_fn), link_ctx_(link_ctx),
      link_index_(static_cast<size_t>(peers) * peers, -1), cpu_free_(peers, 0) {}

uint32_t Engine::add(Listener* op, std::vector<uint32_t> peer_of) {
  ops_.push_back(Op{op, std::move(peer_of)});
  return static_cast<uint32_t>(ops_.size() - 1);
}

void Engine::push(Time t, Ev kind, uint32_t x, uint64_t y, uint32_t z) {
  events_q_.push(Event{t, seq_++, kind, x, y, z});
}

void Engine::at(Time t, uint32_t op, uint32_t rank, uint64_t token) { push(std::max(t, now_), Ev::kTimer, op, token, rank); }

uint32_t Engine::linkOf(uint32_t from_peer, uint32_t to_peer) {
  int32_t& i = link_index_[static_cast<size_t>(from_peer) * peers_ + to_peer];
  if (i < 0) {
    links_.push_back(Link{from_peer, to_peer, LinkModel(link_fn_(link_ctx_, from_peer, to_peer), params_.tcp), 0, {}});
    i = static_cast<int32_t>(links_.size() - 1);
  }
  return static_cast<uint32_t>(i);
}

uint32_t Engine::store(const Frame& f) {
  if (!free_.empty()) {
    const uint32_t slot = free_.back();
    free_.pop_back();
    frames_[slot] = f;
    return slot;
  }
  frames_.push_back(f);
  return static_cast<uint32_t>(frames_.size() - 1);
}

void Engine::send(const Frame& f) {
  const Op& op = ops_[f.op];
  const uint32_t li = linkOf(op.peer_of[f.from], op.peer_of[f.to]);
  Link& l = links_[li];
  const uint32_t slot = store(f);
  l.stats.frames += 1;
  l.stats.wire_bytes += wireBytes(f);
  if (!f.control) l.stats.payload_bytes += f.bytes;
  const LinkParams& p = l.model.params();
  if (f.control || l.model.immediate()) {
    // Unqueued: serialised at the full rate (no time when unlimited), then the delay.
    const Time done = now_ + (p.bytes_per_s > 0 ? static_cast<double>(wireBytes(f)) / p.bytes_per_s : 0.0);
    push(done, Ev::kSent, slot);  // not from inside send(): the operation is still issuing its sends
    push(done + p.delay, Ev::kArrive, slot);
    return;
  }
  l.model.enqueue(slot, static_cast<double>(wireBytes(f)));
  service(li, now_);
}

void Engine::service(uint32_t li, Time t) {
  done_.clear();
  const Time next = links_[li].model.update(t, &done_);
  Link& l = links_[li];
  ++l.generation;
  if (next < std::numeric_limits<Time>::infinity()) push(std::max(next, t), Ev::kLinkDone, li, l.generation);
  for (uint32_t slot : done_) push(t + l.model.params().delay, Ev::kArrive, slot);
  // The operations hear of it once the link is consistent: they may send on it (or add links) at once.
  const std::vector<uint32_t> done = std::move(done_);
  for (uint32_t slot : done) {
    const Frame f = frames_[slot];  // a copy: the listener's sends may grow frames_
    ops_[f.op].listener->sent(f, t);
  }
  done_ = std::move(done);
}

void Engine::arrive(uint32_t slot, Time t) {
  const Frame& f = frames_[slot];
  if (f.control || params_.cpu_bytes_per_s <= 0) return processed(slot, t);
  Time& cpu = cpu_free_[ops_[f.op].peer_of[f.to]];
  cpu = std::max(cpu, t) + static_cast<double>(f.bytes) / params_.cpu_bytes_per_s;
  push(cpu, Ev::kProcessed, slot);
}

void Engine::processed(uint32_t slot, Time t) {
  const Frame f = frames_[slot];
  free_.push_back(slot);
  ops_[f.op].listener->delivered(f, t);
}

void Engine::run() {
  while (!events_q_.empty()) {
    const Event e = events_q_.top();
    events_q_.pop();
    assert(e.t >= now_);
    now_ = e.t;
    ++events_;
    switch (e.kind) {
      case Ev::kLinkDone:
        if (e.y == links_[e.x].generation) service(e.x, e.t);
        break;
      case Ev::kArrive: arrive(e.x, e.t); break;
      case Ev::kProcessed: processed(e.x, e.t); break;
      case Ev::kSent: {
        const Frame f = frames_[e.x];
        ops_[f.op].listener->sent(f, e.t);
        break;
      }
      case Ev::kTimer: ops_[e.x].listener->timer(e.z, e.y, e.t); break;
    }
  }
}

LinkStats Engine::linkStats(uint32_t from_peer, uint32_t to_peer) const {
  const int32_t i = link_index_[static_cast<size_t>(from_peer) * peers_ + to_peer];
  return i < 0 ? LinkStats{} : links_[static_cast<size_t>(i)].stats;
}

std::vector<Engine::LinkRecord> Engine::links() const {
  std::vector<LinkRecord> out;
  for (const Link& l : links_) out.push_back(LinkRecord{l.from, l.to, l.model.params(), l.stats});
  std::sort(out.begin(), out.end(),
            [](const LinkRecord& a, const LinkRecord& b) { return a.from != b.from ? a.from < b.from : a.to < b.to; });
  return out;
}

}  // namespace pccl::sim
