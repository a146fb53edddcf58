#include "router.hpp"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

namespace pccl::wanem {

namespace {
constexpr size_t kSmall = 2048;                       // an MTU-sized packet and its virtio header
constexpr size_t kBig = 65536 + kVnetHdrLen + 64;     // the largest GSO super-packet
constexpr size_t kMaxHeldBytes = size_t{1} << 30;     // buffers queued in all lanes together
constexpr size_t kMaxPooled = 4096;
constexpr int64_t kWakeTimerNs = 5'000'000;
constexpr int64_t kBatchNs = 100'000;

void realtime(std::thread& t, int prio, int cpu) {
  sched_param sp{};
  sp.sched_priority = prio;
  pthread_setschedparam(t.native_handle(), SCHED_FIFO, &sp);  // best effort: fine if refused
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(t.native_handle(), sizeof set, &set);  // best effort too
}

// Segments before the next random loss: geometric with success probability 1 - p.
uint64_t drawUntilLoss(std::mt19937_64& rng, double p) {
  if (p <= 0) return UINT64_MAX;
  if (p >= 1) return 0;
  const double u = 1.0 - std::uniform_real_distribution<double>(0.0, 1.0)(rng);  // (0, 1]
  return static_cast<uint64_t>(std::floor(std::log(u) / std::log1p(-p)));
}
}  // namespace

int64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Router::Router(std::vector<std::vector<int>> tun_fds, std::vector<uint32_t> rank_addrs, Topology topology, uint64_t seed)
    : addrs_(std::move(rank_addrs)), topo_(std::move(topology)), origin_ns_(monotonicNs()), kernel_(origin_ns_) {
  const size_t n = addrs_.size();
  for (size_t r = 0; r < n; ++r) {
    up_.emplace_back(topo_.uplink[r]);
    down_.emplace_back(topo_.downlink[r]);
  }
  for (size_t r = 0; r < n; ++r) {
    const EdgeKind k = r < topo_.edge.size() ? topo_.edge[r] : EdgeKind::kOpen;
    edges_.push_back(std::make_unique<Edge>(k, addrs_[r], natPublicAddr(addrs_[r])));
  }
  path_links_.resize(n);
  for (size_t s = 0; s < n; ++s) {
    for (size_t d = 0; d < n; ++d) path_links_[s].emplace_back(topo_.paths[s][d].link);
  }
  path_last_ns_.assign(n, std::vector<int64_t>(n, 0));
  down_until_.assign(n, std::vector<int64_t>(n, 0));
  burst_until_ = down_until_;
  burst_loss_.assign(n, std::vector<double>(n, 0));
  reset_gen_.assign(n, std::vector<uint32_t>(n, 0));
  reset_silent_.assign(n, std::vector<uint8_t>(n, 0));
  for (auto& fds : tun_fds) {
    auto lane = std::make_unique<Lane>();
    lane->fds = std::move(fds);
    lane->empty_at.assign(lane->fds.size(), monotonicNs());
    lane->rng.seed(seed + lanes_.size());
    lane->until_loss.assign(n, std::vector<uint64_t>(n, 0));
    lane->counts.assign(n, std::vector<PathCount>(n));
    for (size_t s = 0; s < n; ++s) {
      for (size_t d = 0; d < n; ++d) lane->until_loss[s][d] = drawUntilLoss(lane->rng, topo_.paths[s][d].loss);
    }
    lane->timeline = Timeline(origin_ns_);
    lanes_.push_back(std::move(lane));
  }
}

Router::~Router() { stop(); }

void Router::start(std::function<uint64_t()> kernel_drops) {
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = *lanes_[i];
    lane.thread = std::thread([this, &lane] { laneLoop(lane); });
    realtime(lane.thread, 10, static_cast<int>(static_cast<long>(i) % cpus));
  }
  if (kernel_drops) monitor_ = std::thread([this, f = std::move(kernel_drops)] { monitorLoop(f); });
}

void Router::stop() {
  if (stop_.exchange(true)) return;
  monitor_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  for (auto& l : lanes_) {
    if (l->thread.joinable()) l->thread.join();
  }
}

int Router::rankOf(uint32_t addr) const {
  for (size_t i = 0; i < addrs_.size(); ++i) {
    if (addrs_[i] == addr) return static_cast<int>(i);
  }
  for (size_t i = 0; i < edges_.size(); ++i) {  // a packet for a NAT's public address goes to its rank
    if (edges_[i]->kind() != EdgeKind::kOpen && edges_[i]->publicAddr() == addr) return static_cast<int>(i);
  }
  return -1;
}

Router::Buf Router::takeBuffer(Lane& lane, bool big) {
  auto& pool = big ? lane.big_pool : lane.small_pool;
  Buf b;
  if (!pool.empty()) {
    b.bytes = std::move(pool.back());
    pool.pop_back();
  } else {
    b.bytes.resize(big ? kBig : kSmall);
  }
  return b;
}

void Router::recycle(Lane& lane, Buf buf) {
  auto& pool = buf.bytes.size() == kBig ? lane.big_pool : lane.small_pool;
  if ((buf.bytes.size() == kBig || buf.bytes.size() == kSmall) && pool.size() < kMaxPooled) pool.push_back(std::move(buf.bytes));
}

void Router::push(Lane& lane, Event e) {
  if (lane.held_bytes + e.buf.bytes.size() > kMaxHeldBytes / lanes_.size()) {
    lane.timeline.at(e.due_ns).emulator_drops += 1;
    recycle(lane, std::move(e.buf));
    return;
  }
  lane.held_bytes += e.buf.bytes.size();
  e.seq = lane.seq++;
  lane.events.push(std::move(e));
}

std::vector<std::pair<Router::Buf, PacketInfo>> Router::cross(Lane& lane, Link& link, Buf buf, const PacketInfo& info,
                                                              int64_t t, const std::vector<bool>* lost, int64_t* depart,
                                                              Bin* bin) {
  std::vector<std::pair<Buf, PacketInfo>> out;
  std::vector<bool> keep(info.segments, true);
  uint32_t kept = info.segments;
  if (lost != nullptr) {  // random loss: no queue involved
    for (uint32_t i = 0; i < info.segments; ++i) keep[i] = !(*lost)[i];
    kept = static_cast<uint32_t>(std::count(keep.begin(), keep.end(), true));
    bin->lost_random += info.segments - kept;
  } else {
    kept = link.offer(t, info, depart);
    bin->queue_drops += info.segments - kept;
    for (uint32_t i = kept; i < info.segments; ++i) keep[i] = false;
  }
  if (kept == info.segments) {
    out.emplace_back(std::move(buf), info);
    return out;
  }
  std::vector<std::vector<uint8_t>> pieces;
  if (kept > 0 && splitSegments(buf.bytes.data(), buf.len, keep, &pieces)) {
    for (auto& p : pieces) {
      Buf b;
      b.len = p.size();
      b.bytes = std::move(p);
      const PacketInfo pi = parsePacket(b.bytes.data(), b.len);
      out.emplace_back(std::move(b), pi);
    }
  }
  std::lock_guard<std::mutex> lk(lane.mu);
  recycle(lane, std::move(buf));
  return out;
}

void Router::enter(Lane& lane, Buf buf, const PacketInfo& info, int src, int dst, int64_t now, double tun_wait_us) {
  const auto s = static_cast<size_t>(src), d = static_cast<size_t>(dst);
  const PathModel& m = topo_.paths[s][d];
  Bin bin;
  bin.packets = 1;
  bin.segments = info.segments;
  bin.bytes = info.wire_bytes;
  std::vector<Event> ready;
  {
    std::lock_guard<std::mutex> lk(links_mu_);
    if (blackedOut(src, dst, now, info.segments) || resetTakes(buf, src, dst, now, &ready)) {
      std::lock_guard<std::mutex> lane_lk(lane.mu);
      lane.timeline.at(now).merge(bin);
      recycle(lane, std::move(buf));
      for (auto& e : ready) push(lane, std::move(e));
      return;
    }
    const bool burst = now < burst_until_[s][d];
    int64_t t1 = now;
    for (auto& [b1, i1] : cross(lane, up_[s], std::move(buf), info, now, nullptr, &t1, &bin)) {
      // Random loss on the path, per segment (reader-only state: no lock needed for it).
      std::vector<bool> lost(i1.segments, false);
      bool any = false;
      for (uint32_t k = 0; k < i1.segments; ++k) {
        uint64_t& left = lane.until_loss[s][d];
        if (left == 0) {
          lost[k] = any = true;
          left = drawUntilLoss(lane.rng, m.loss);
        } else if (left != UINT64_MAX) {
          --left;
        }
        if (burst && !lost[k] && std::uniform_real_distribution<double>(0, 1)(lane.rng) < burst_loss_[s][d]) {
          lost[k] = any = true;
          fault_counts_.burst_segments += 1;
        }
      }
      auto survivors = any ? cross(lane, up_[s], std::move(b1), i1, t1, &lost, nullptr, &bin)
                           : std::vector<std::pair<Buf, PacketInfo>>{};
      if (!any) survivors.emplace_back(std::move(b1), i1);
      lane.counts[s][d].segments += i1.segments;
      lane.counts[s][d].lost += static_cast<uint64_t>(std::count(lost.begin(), lost.end(), true));
      for (auto& [b2, i2] : survivors) {
        int64_t t2 = t1;
        for (auto& [b3, i3] : cross(lane, path_links_[s][d], std::move(b2), i2, t1, nullptr, &t2, &bin)) {
          const double jitter = m.jitter_ms > 0 ? std::uniform_real_distribution<double>(0, m.jitter_ms)(lane.rng) : 0;
          int64_t t3 = t2 + static_cast<int64_t>((m.delay_ms + jitter) * 1e6);
          t3 = std::max(t3, path_last_ns_[s][d]);  // jitter never reorders a path
          path_last_ns_[s][d] = t3;
          ready.push_back(Event{t3, 0, Stage::kAtDownlink, src, dst, tun_wait_us, i3, std::move(b3)});
        }
      }
    }
  }
  std::lock_guard<std::mutex> lk(lane.mu);
  lane.timeline.at(now).merge(bin);
  for (auto& e : ready) push(lane, std::move(e));
}

void Router::laneLoop(Lane& lane) {
  const int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  itimerspec its{};
  its.it_interval.tv_nsec = kWakeTimerNs;
  its.it_value.tv_nsec = kWakeTimerNs;
  int64_t timer_due = monotonicNs() + kWakeTimerNs;
  if (tfd >= 0) timerfd_settime(tfd, 0, &its, nullptr);
  Buf scratch;
  {
    std::lock_guard<std::mutex> lk(lane.mu);
    scratch = takeBuffer(lane, true);
  }
  std::vector<pollfd> p(lane.fds.size() + 1);
  while (!stop_) {
    drain(lane, scratch);
    const int64_t next = writeDue(lane, scratch);
    // Sleep until the next release (plus up to kBatchNs, so that one wake-up writes every packet due by
    // then), a packet, or the wake-up timer; at most 100 ms, to see stop_.
    const int64_t wait = next < 0 ? 100'000'000 : std::max<int64_t>(0, next + kBatchNs - monotonicNs());
    const timespec ts{static_cast<time_t>(wait / 1'000'000'000), static_cast<long>(wait % 1'000'000'000)};
    for (size_t r = 0; r < lane.fds.size(); ++r) p[r] = {lane.fds[r], POLLIN, 0};
    p.back() = {tfd, POLLIN, 0};  // a negative fd is ignored by poll
    if (ppoll(p.data(), p.size(), &ts, nullptr) <= 0) continue;
    const int64_t wake = monotonicNs();
    if (tfd >= 0 && (p.back().revents & POLLIN) != 0) {
      uint64_t expirations = 0;
      if (::read(tfd, &expirations, sizeof expirations) == sizeof expirations && expirations > 0) {
        std::lock_guard<std::mutex> lk(lane.mu);
        lane.timeline.at(wake).wake.add(static_cast<double>(wake - timer_due) / 1000.0);
        timer_due += static_cast<int64_t>(expirations) * kWakeTimerNs;
      }
    }
    // Woken by a packet: it entered the queue after this thread went to sleep on an empty queue, and it
    // woke the thread; its wait is bounded by now - wake (the wake-up latency is sampled above).
    for (size_t r = 0; r < lane.fds.size(); ++r) {
      if ((p[r].revents & POLLIN) != 0) lane.empty_at[r] = std::max(lane.empty_at[r], wake);
    }
  }
  if (tfd >= 0) close(tfd);
}

void Router::drain(Lane& lane, Buf& scratch) {
  for (size_t r = 0; r < lane.fds.size() && !stop_; ++r) drainRank(lane, scratch, static_cast<int>(r));
}

void Router::drainRank(Lane& lane, Buf& scratch, int from) {
  const auto q = static_cast<size_t>(from);
  while (!stop_) {
    const ssize_t n = ::read(lane.fds[q], scratch.bytes.data(), scratch.bytes.size());
    const int64_t now = monotonicNs();
    if (n <= 0) {  // EAGAIN: empty now, so whatever is read later entered after now
      lane.empty_at[q] = now;
      return;
    }
    scratch.len = static_cast<size_t>(n);
    PacketInfo info = parsePacket(scratch.bytes.data(), scratch.len);
    const int src = info.ipv4 ? rankOf(info.src) : -1, dst = info.ipv4 ? rankOf(info.dst) : -1;
    if (src != from || dst < 0 || dst == from || info.src != addrs_[q]) {  // not from this rank to another
      std::lock_guard<std::mutex> lk(lane.mu);                             // (e.g. IGMP): dropped
      lane.unknown += 1;
      continue;
    }
    // Leaving the rank: its firewall records the flow, its NAT gives it the public address and port.
    if (edges_[q]->kind() != EdgeKind::kOpen) {
      if (!edges_[q]->outbound(scratch.bytes.data(), scratch.len)) continue;
      info = parsePacket(scratch.bytes.data(), scratch.len);
    }
    Buf pkt;
    {
      std::lock_guard<std::mutex> lk(lane.mu);
      if (scratch.len <= kSmall) {
        pkt = takeBuffer(lane, false);
        std::memcpy(pkt.bytes.data(), scratch.bytes.data(), scratch.len);
        pkt.len = scratch.len;
      } else {
        pkt = std::move(scratch);
        scratch = takeBuffer(lane, true);
      }
    }
    enter(lane, std::move(pkt), info, src, dst, now, static_cast<double>(now - lane.empty_at[q]) / 1000.0);
  }
}

int64_t Router::writeDue(Lane& lane, Buf& scratch) {
  std::unique_lock<std::mutex> lk(lane.mu);
  while (!stop_ && !lane.events.empty()) {
    if (lane.events.top().due_ns > monotonicNs()) return lane.events.top().due_ns;
    Event e = std::move(const_cast<Event&>(lane.events.top()));
    lane.events.pop();
    lane.held_bytes -= e.buf.bytes.size();
    if (e.stage == Stage::kAtDownlink) {  // it reaches the receiver's downlink now (in virtual time: at due)
      lk.unlock();
      Bin bin;
      int64_t depart = e.due_ns;
      std::vector<std::pair<Buf, PacketInfo>> out;
      {
        std::lock_guard<std::mutex> links(links_mu_);
        out = cross(lane, down_[static_cast<size_t>(e.dst)], std::move(e.buf), e.info, e.due_ns, nullptr, &depart, &bin);
      }
      lk.lock();
      lane.timeline.at(e.due_ns).merge(bin);
      for (auto& [b, i] : out) push(lane, Event{depart, 0, Stage::kRelease, e.src, e.dst, e.tun_wait_us, i, std::move(b)});
      continue;
    }
    lk.unlock();
    // Arriving at the rank: its firewall or NAT lets in only what the rank asked for (and the NAT
    // translates it back to the rank's own address and port).
    if (!edges_[static_cast<size_t>(e.dst)]->inbound(e.buf.bytes.data(), e.buf.len)) {
      lk.lock();
      recycle(lane, std::move(e.buf));
      continue;
    }
    const int64_t now = monotonicNs();
    // The kernel delivers the packet inside this write (and runs the receiver's TCP, which may send).
    const int fd = lane.fds[static_cast<size_t>(e.dst)];
    const bool ok = ::write(fd, e.buf.bytes.data(), e.buf.len) == static_cast<ssize_t>(e.buf.len);
    lk.lock();
    Bin& bin = lane.timeline.at(now);
    if (!ok) bin.emulator_drops += 1;
    bin.late.add(e.tun_wait_us + static_cast<double>(now - e.due_ns) / 1000.0);
    bin.tun_wait.add(e.tun_wait_us);
    recycle(lane, std::move(e.buf));
    // Take what arrived meanwhile (often what this write made a sender send), so that a burst of
    // releases does not hold arrivals in the TUN queue.
    lk.unlock();
    drain(lane, scratch);
    lk.lock();
  }
  return -1;
}

void Router::monitorLoop(std::function<uint64_t()> kernel_drops) {
  uint64_t last = kernel_drops();
  std::unique_lock<std::mutex> lk(monitor_mu_);
  while (!stop_) {
    monitor_cv_.wait_for(lk, std::chrono::milliseconds(100));
    lk.unlock();
    const uint64_t now_count = kernel_drops();
    const int64_t now = monotonicNs();
    lk.lock();
    if (now_count > last) kernel_.at(now).emulator_drops += now_count - last;
    last = std::max(last, now_count);
  }
}

Bin Router::window(const std::vector<std::pair<int64_t, int64_t>>& intervals) const {
  Bin b;
  for (const auto& l : lanes_) {
    std::lock_guard<std::mutex> lk(l->mu);
    b.merge(l->timeline.sum(intervals));
  }
  std::lock_guard<std::mutex> lk(monitor_mu_);
  b.merge(kernel_.sum(intervals));
  return b;
}

RouterStats Router::stats() const {
  RouterStats s;
  s.paths_count.assign(addrs_.size(), std::vector<PathCount>(addrs_.size()));
  for (const auto& l : lanes_) {
    std::lock_guard<std::mutex> lk(l->mu);
    s.total.merge(l->timeline.total());
    s.unknown += l->unknown;
    for (size_t i = 0; i < addrs_.size(); ++i) {
      for (size_t j = 0; j < addrs_.size(); ++j) {
        s.paths_count[i][j].segments += l->counts[i][j].segments;
        s.paths_count[i][j].lost += l->counts[i][j].lost;
      }
    }
  }
  {
    std::lock_guard<std::mutex> lk(monitor_mu_);
    s.total.merge(kernel_.total());
  }
  std::lock_guard<std::mutex> lk(links_mu_);
  auto add = [](LinkStats* into, const LinkStats& x) {
    into->segments += x.segments;
    into->bytes += x.bytes;
    into->dropped += x.dropped;
    into->max_queue_delay_ns = std::max(into->max_queue_delay_ns, x.max_queue_delay_ns);
    into->min_drop_backlog = std::min(into->min_drop_backlog, x.min_drop_backlog);
  };
  for (const auto& l : up_) add(&s.uplinks, l.stats());
  for (const auto& l : down_) add(&s.downlinks, l.stats());
  for (const auto& row : path_links_) {
    for (const auto& l : row) add(&s.paths, l.stats());
  }
  s.faults = fault_counts_;
  for (const auto& e : edges_) s.edges.push_back(e->counts());
  return s;
}

bool Router::blackedOut(int src, int dst, int64_t now, uint32_t segments) {
  if (now >= down_until_[static_cast<size_t>(src)][static_cast<size_t>(dst)]) return false;
  fault_counts_.down_segments += segments;
  return true;
}

// A reset connection: the emulator has forgotten it, as a middlebox that dropped its state does. Every
// packet of it is dropped, and its sender gets an RST whose sequence number is exactly what that packet
// acknowledges (the sender's own next expected byte, so the kernel takes it at once: RFC 5961). Each end
// is reset when it next sends; a new connection (a SYN) starts clean.
bool Router::resetTakes(const Buf& buf, int src, int dst, int64_t now, std::vector<Event>* rst) {
  TcpFields t;
  if (!parseTcp(buf.bytes.data(), buf.len, &t)) return false;
  const auto s = static_cast<size_t>(src), d = static_cast<size_t>(dst);
  const uint64_t me = (uint64_t{addrs_[s]} << 16) | t.sport, peer = (uint64_t{addrs_[d]} << 16) | t.dport;
  const bool lower = me < peer;
  const auto key = lower ? std::make_pair(me, peer) : std::make_pair(peer, me);
  const uint32_t gen = reset_gen_[s][d];
  const bool syn = (t.flags & kTcpFlagSyn) != 0 && (t.flags & kTcpFlagAck) == 0;
  if (syn) {  // every connection is recorded as it opens, with its pair's generation then
    flows_[key] = FlowState{gen, 0};
    return false;
  }
  if (gen == 0) return false;  // this pair was never reset: no lookup per packet
  auto it = flows_.find(key);
  if (it == flows_.end()) return false;
  FlowState& f = it->second;
  if (f.gen == gen || (t.flags & kTcpFlagRst) != 0) return false;
  if (reset_silent_[s][d] != 0) return true;  // forgotten: dropped, and nobody is told
  if ((t.flags & kTcpFlagAck) != 0) {
    // From the packet's destination to its source as they are on the wire (a NAT's public side).
    const PacketInfo wire = parsePacket(buf.bytes.data(), buf.len);
    std::vector<uint8_t> bytes = makeRst(wire.dst, wire.src, t.dport, t.sport, t.ack);
    Buf b;
    b.len = bytes.size();
    b.bytes = std::move(bytes);
    const PacketInfo info = parsePacket(b.bytes.data(), b.len);
    rst->push_back(Event{now, 0, Stage::kRelease, dst, src, 0.0, info, std::move(b)});
    fault_counts_.resets_sent += 1;
  }
  f.ends_reset |= lower ? 1 : 2;
  if (f.ends_reset == 3) f = FlowState{gen, 0};
  return true;
}

void Router::applyFault(const Fault& f, const Topology* changed) {
  std::lock_guard<std::mutex> lk(links_mu_);
  const int64_t now = monotonicNs();
  const auto until = now + static_cast<int64_t>(f.for_s * 1e9);
  switch (f.kind) {
    case Fault::Kind::kDown:
      fault_counts_.down += 1;
      for (const auto& [a, b] : f.pairs) {
        int64_t& u = down_until_[static_cast<size_t>(a)][static_cast<size_t>(b)];
        u = std::max(u, until);
      }
      break;
    case Fault::Kind::kBurst:
      fault_counts_.burst += 1;
      for (const auto& [a, b] : f.pairs) {
        burst_until_[static_cast<size_t>(a)][static_cast<size_t>(b)] = until;
        burst_loss_[static_cast<size_t>(a)][static_cast<size_t>(b)] = f.loss;
      }
      break;
    case Fault::Kind::kReset:
    case Fault::Kind::kForget: {
      const bool silent = f.kind == Fault::Kind::kForget;
      fault_counts_.reset += silent ? 0 : 1;
      fault_counts_.forget += silent ? 1 : 0;
      std::vector<std::vector<bool>> done(addrs_.size(), std::vector<bool>(addrs_.size(), false));
      for (const auto& [a, b] : f.pairs) {
        const auto lo = static_cast<size_t>(std::min(a, b)), hi = static_cast<size_t>(std::max(a, b));
        if (done[lo][hi]) continue;
        done[lo][hi] = true;
        reset_gen_[lo][hi] += 1;
        reset_gen_[hi][lo] = reset_gen_[lo][hi];
        reset_silent_[lo][hi] = reset_silent_[hi][lo] = silent ? 1 : 0;
      }
      break;
    }
    case Fault::Kind::kPath: {
      fault_counts_.path += 1;
      if (changed == nullptr) break;
      for (size_t a = 0; a < addrs_.size(); ++a) {
        for (size_t b = 0; b < addrs_.size(); ++b) {
          PathModel& live = topo_.paths[a][b];
          const PathModel& next = changed->paths[a][b];
          const bool loss_changed = live.loss != next.loss;
          live.delay_ms = next.delay_ms;
          live.jitter_ms = next.jitter_ms;
          live.loss = next.loss;
          if (next.link.rate_mbit != live.link.rate_mbit || next.link.queue_bytes != live.link.queue_bytes) {
            live.link = next.link;
            path_links_[a][b] = Link(next.link);
          }
          // The lanes draw the next random loss under links_mu_ too.
          if (loss_changed) {
            for (auto& lane : lanes_) lane->until_loss[a][b] = drawUntilLoss(lane->rng, next.loss);
          }
        }
      }
      break;
    }
  }
}

}  // namespace pccl::wanem
