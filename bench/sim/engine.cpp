#include "engine.hpp"

#include <algorithm>
#include <cassert>
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
    Link l;
    l.from = from_peer;
    l.to = to_peer;
    l.p = link_fn_(link_ctx_, from_peer, to_peer);
    if (l.p.lanes == 0) l.p.lanes = 1;
    links_.push_back(std::move(l));
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
  if (f.control || l.p.bytes_per_s <= 0) {
    // Unqueued: serialised at the full rate (no time when unlimited), then the delay.
    const Time done = now_ + (l.p.bytes_per_s > 0 ? static_cast<double>(wireBytes(f)) / l.p.bytes_per_s : 0.0);
    push(done, Ev::kSent, slot);  // not from inside send(): the operation is still issuing its sends
    push(done + l.p.delay, Ev::kArrive, slot);
    return;
  }
  if (l.serving.size() < l.p.lanes) {
    admit(l, slot, now_);
    reschedule(li, now_);
  } else {
    l.waiting.push_back(slot);
  }
}

// Processor sharing: every job in service has received `served` virtual bytes; it grows at rate / jobs.
void Engine::advance(Link& l, Time t) {
  if (!l.serving.empty() && t > l.last) {
    l.served += (t - l.last) * l.p.bytes_per_s / static_cast<double>(l.serving.size());
  }
  l.last = t;
}

void Engine::admit(Link& l, uint32_t slot, Time t) {
  advance(l, t);
  l.serving.push(Job{l.served + static_cast<double>(wireBytes(frames_[slot])), job_seq_++, slot});
}

void Engine::reschedule(uint32_t li, Time t) {
  Link& l = links_[li];
  ++l.generation;
  if (l.serving.empty()) return;
  const double left = std::max(0.0, l.serving.top().tag - l.served);
  push(t + left * static_cast<double>(l.serving.size()) / l.p.bytes_per_s, Ev::kLinkDone, li, l.generation);
}

void Engine::linkDone(uint32_t li, uint64_t generation, Time t) {
  Link& l = links_[li];
  if (generation != l.generation) return;  // the set in service changed since: a newer event stands
  advance(l, t);
  // Every job whose tag is reached leaves now: ties, rounding, and what is left of a job that would not
  // move the clock forward (late in a long run, a few bytes' rounding of served takes no time).
  const double eps = 1e-6 + 1e-9 * l.served;
  auto due = [&](const Job& j) {
    const double left = j.tag - l.served;
    return left <= eps || t + left * static_cast<double>(l.serving.size()) / l.p.bytes_per_s <= t;
  };
  done_.clear();
  while (!l.serving.empty() && due(l.serving.top())) {
    const Job j = l.serving.top();
    l.serving.pop();
    l.served = std::max(l.served, j.tag);
    done_.push_back(j.slot);
    push(t + l.p.delay, Ev::kArrive, j.slot);
  }
  while (l.serving.size() < l.p.lanes && !l.waiting.empty()) {
    const uint32_t slot = l.waiting.front();
    l.waiting.pop_front();
    admit(l, slot, t);
  }
  reschedule(li, t);
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
      case Ev::kLinkDone: linkDone(e.x, e.y, e.t); break;
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
  for (const Link& l : links_) out.push_back(LinkRecord{l.from, l.to, l.p, l.stats});
  std::sort(out.begin(), out.end(),
            [](const LinkRecord& a, const LinkRecord& b) { return a.from != b.from ? a.from < b.from : a.to < b.to; });
  return out;
}

}  // namespace pccl::sim
