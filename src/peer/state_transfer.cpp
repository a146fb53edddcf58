#include "peer/state_transfer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "util/log.hpp"
#include "wire/bytes.hpp"
#include "wire/sync_messages.hpp"

namespace pccl::peer {

namespace {
constexpr const char* kLog = "state";
// Compression buffers kept for reuse (each about one chunk).
constexpr size_t kMaxSpareBuffers = 8;
// A request's payload at most: length, level, and a name of kMaxSyncKeyName bytes.
constexpr uint32_t kMaxRequestBytes = 8 + 1 + 2 + wire::kMaxSyncKeyName;

// What the network does to a connection (a reset, a timeout, a refused or closed one), which a later
// dial may not meet again; anything else (a bad response, authentication, another version) is final.
bool passing(const Status& why) {
  return why.code() == Code::kPeerLost || why.code() == Code::kSystemError || why.code() == Code::kTimeout;
}
}  // namespace

std::vector<uint8_t> encodeStateRequest(uint64_t length, uint8_t level, const std::string& name) {
  std::vector<uint8_t> out;
  wire::ByteWriter w(&out);
  w.u64(length);
  w.u8(level);
  w.str(name);
  return out;
}

Result<StateRequest> decodeStateRequest(const uint8_t* data, size_t size) {
  wire::ByteReader r(data, size);
  StateRequest q;
  PCCL_RETURN_IF_ERROR(r.u64(&q.length));
  PCCL_RETURN_IF_ERROR(r.u8(&q.level));
  PCCL_RETURN_IF_ERROR(r.str(&q.name, wire::kMaxSyncKeyName));
  PCCL_RETURN_IF_ERROR(r.expectEnd());
  return q;
}

// ---- StateServer ------------------------------------------------------------------------------------

StateServer::~StateServer() { stop(Status::ok()); }

void StateServer::serve(uint64_t sync_id, std::map<std::string, Span> keys) {
  sync_id_ = sync_id;
  last_sync_id_ = std::max(last_sync_id_, sync_id);
  keys_ = std::move(keys);
  std::vector<std::weak_ptr<net::DataChannel>> paused = std::move(paused_);
  paused_.clear();
  for (auto& w : paused) {
    if (auto ch = w.lock()) ch->resume();
  }
}

void StateServer::stop(const Status& why) {
  sync_id_ = 0;
  keys_.clear();
  paused_.clear();
  std::vector<std::shared_ptr<net::DataChannel>> conns = std::move(conns_);
  conns_.clear();
  for (auto& c : conns) c->close(why.isOk() ? Status::invalidUsage("the shared-state sync is over here") : why);
}

void StateServer::adopt(net::Link link, uint64_t epoch) {
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return !c->isOpen(); }), conns_.end());
  if (conns_.size() >= kMaxStateConnections) {
    PCCL_LOG_WARN(kLog, "refusing a state connection from {}: {} are open", net::remoteName(link.socket), conns_.size());
    return;  // the socket closes as it goes out of scope
  }
  std::string who = "state fetcher " + net::remoteName(link.socket);
  auto ch = std::make_shared<net::DataChannel>(std::move(link), epoch, std::move(who));
  conns_.push_back(ch);
  ch->start(this);
}

Result<net::Placement> StateServer::place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) {
  if ((h.flags & wire::kDataRequest) == 0 || (h.flags & wire::kDataCompressed) != 0) {
    return Status::protocol(fmt::format("{}: a state connection carries requests only", ch.name()));
  }
  if (bytes > kMaxRequestBytes) {
    return Status::protocol(fmt::format("{}: a {}-byte request (at most {})", ch.name(), bytes, kMaxRequestBytes));
  }
  if (sync_id_ != 0 && h.op_id == sync_id_) return net::Placement::stage();
  if (h.op_id > last_sync_id_) {
    // The fetcher heard its plan before we heard ours: wait for it (the sync's deadline bounds this).
    paused_.push_back(ch.weak_from_this());
    return net::Placement::pause();
  }
  return Status::invalidUsage(
      fmt::format("{}: request for shared-state sync {}, which this peer is not serving", ch.name(), h.op_id));
}

Status StateServer::deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) {
  PCCL_ASSIGN_OR_RETURN(StateRequest q, decodeStateRequest(data, bytes));
  auto it = keys_.find(q.name);
  if (it == keys_.end()) {
    return Status::invalidUsage(fmt::format("{}: no shared-state key \"{}\" here", ch.name(), q.name));
  }
  const Span& s = it->second;
  if (q.length == 0 || q.length > wire::kMaxDataPayload || h.offset > s.bytes || q.length > s.bytes - h.offset) {
    return Status::protocol(fmt::format("{}: request for bytes [{}, +{}) of \"{}\", which holds {}", ch.name(),
                                        h.offset, q.length, q.name, s.bytes));
  }
  if (q.level > codec::kMaxZstdLevel) {
    return Status::protocol(fmt::format("{}: zstd level {} (at most {})", ch.name(), q.level, codec::kMaxZstdLevel));
  }
  wire::DataHeader out = wire::dataHeader(h.op_id, h.phase, 0, h.offset);
  const uint8_t* src = s.data + h.offset;
  const auto length = static_cast<uint32_t>(q.length);
  if (q.level > 0) {
    // Compressed answers go out of buffers reused from answer to answer (no allocation per chunk).
    std::shared_ptr<std::vector<uint8_t>> packed;
    if (spare_.empty()) {
      packed = std::make_shared<std::vector<uint8_t>>();
    } else {
      packed = std::move(spare_.back());
      spare_.pop_back();
    }
    packed->resize(codec::Compressor::bound(length));
    auto recycle = [this, packed](const Status&) {
      if (spare_.size() < kMaxSpareBuffers) spare_.push_back(packed);
    };
    PCCL_ASSIGN_OR_RETURN(size_t z, compressor_.compress(src, length, packed->data(), packed->size(), q.level));
    if (z != 0) {
      out.flags = wire::kDataCompressed;
      tx_bytes_ += z;
      ch.send(out, packed->data(), static_cast<uint32_t>(z), std::move(recycle));
      return Status::ok();
    }
    recycle(Status::ok());
  }
  // Straight from the owner's buffer: it stays untouched until the sync is over (stop() first).
  tx_bytes_ += length;
  ch.send(out, src, length, [](const Status&) {});
  return Status::ok();
}

void StateServer::channelClosed(net::DataChannel& ch, const Status& why) {
  if (!why.isOk() && why.code() != Code::kPeerLost && sync_id_ != 0) {
    PCCL_LOG_WARN(kLog, "{}: {}", ch.name(), why.toString());
  }
}

// ---- StateFetcher -----------------------------------------------------------------------------------

StateFetcher::StateFetcher(asio::io_context& io, std::shared_ptr<const net::AuthKey> key)
    : io_(io), auth_(std::move(key)) {}

StateFetcher::~StateFetcher() {
  over_ = true;
  for (auto& c : conns_) {
    if (c.channel) c.channel->close(Status::ok());
  }
}

void StateFetcher::start(FetchPlan plan, Done done, Arrived arrived) {
  plan_ = std::move(plan);
  done_ = std::move(done);
  arrived_ = std::move(arrived);
  over_ = false;
  conns_.clear();
  retry_.clear();
  next_offset_.assign(plan_.keys.size(), 0);
  first_open_ = 0;
  settled_ = 0;
  started_ = false;
  rx_bytes_ = 0;
  std::vector<bool> used(plan_.sources.size(), false);
  for (const FetchKey& k : plan_.keys) {
    if (k.bytes > 0 && k.sources.empty()) {
      return finish(Status::internal(fmt::format("shared-state key \"{}\" to fetch from nobody", k.name)));
    }
    for (size_t s : k.sources) {
      if (s >= used.size()) return finish(Status::internal("shared-state fetch source out of range"));
      used[s] = true;
    }
  }
  for (size_t s = 0; s < used.size(); ++s) {
    if (!used[s]) continue;
    for (uint32_t i = 0; i < std::max<uint32_t>(1, plan_.sources[s].connections); ++i) conns_.push_back(Conn{s, nullptr, {}});
  }
  maybeDone();
  for (size_t i = 0; i < conns_.size() && !over_; ++i) dial(i);
}

void StateFetcher::cancel(const Status& why) { finish(why); }

void StateFetcher::dial(size_t i) {
  const FetchSource& src = plan_.sources[conns_[i].source];
  std::string who = "state source " + src.name;
  net::ClientHandshake hs{wire::Role::kStateFetch, auth_, plan_.handshake_timeout, who};
  auto self = shared_from_this();
  net::asyncDial(io_, src.address, hs, [self, i, who](Result<net::Link> r) {
    if (self->over_) return;
    if (!r.isOk()) return self->broke(i, r.status().withContext(who));
    auto ch = std::make_shared<net::DataChannel>(std::move(r).value(), self->plan_.epoch, who);
    self->conns_[i].channel = ch;
    ch->start(self.get());
    if (!self->started_) return self->settled(i);
    self->refill(i);
  });
}

void StateFetcher::settled(size_t i) {
  if (started_ || conns_[i].settled) return;
  conns_[i].settled = true;
  if (++settled_ < conns_.size()) return;
  started_ = true;
  // All dialled: hand out the first requests round-robin, so every source gets a share even when
  // there are only a few chunks; from then on each connection asks for more as answers arrive.
  for (size_t depth = 0; depth < kStateRequestDepth; ++depth) {
    for (size_t c = 0; c < conns_.size(); ++c) refill(c, depth + 1);
  }
}

void StateFetcher::broke(size_t i, const Status& why) {
  Conn& c = conns_[i];
  // Released after this callback (the channel may be the one calling).
  if (c.channel) asio::post(io_, [gone = std::move(c.channel)] {});
  c.channel = nullptr;
  // Its unanswered requests are asked again, first, on whichever connection can take them.
  for (auto it = c.outstanding.rbegin(); it != c.outstanding.rend(); ++it) retry_.push_front(*it);
  c.outstanding.clear();
  const TimePoint now = Clock::now();
  if (!c.broken) {
    c.broken = true;
    c.broken_since = now;
    c.redials = 0;
  }
  const auto spent = std::chrono::duration_cast<Millis>(now - c.broken_since);
  if (!passing(why) || spent >= plan_.redial_window) {
    if (c.redials > 0) {
      return finish(Status(why.code(), fmt::format("{} (dialled again {} times over {} ms)", why.message(), c.redials,
                                                   spent.count())));
    }
    return finish(why);
  }
  PCCL_LOG_DEBUG(kLog, "{}; dialling again ({} of its requests to be asked again)", why.toString(), retry_.size());
  if (!started_) settled(i);  // the others need not wait for this one
  for (size_t k = 0; k < conns_.size(); ++k) refill(k);
  // 100 ms, doubling to 1 s: a path that comes back is seen within a second.
  auto timer = std::make_shared<asio::steady_timer>(io_, doublingBackoff(Millis(100), c.redials++, Millis(1000)));
  auto self = shared_from_this();
  timer->async_wait([self, timer, i](const asio::error_code& ec) {
    if (!ec && !self->over_) self->dial(i);
  });
}

bool StateFetcher::nextChunk(size_t source, Request* out) {
  for (auto it = retry_.begin(); it != retry_.end(); ++it) {
    const auto& from = plan_.keys[it->key].sources;
    if (std::find(from.begin(), from.end(), source) == from.end()) continue;
    *out = *it;
    retry_.erase(it);
    return true;
  }
  while (first_open_ < plan_.keys.size() && next_offset_[first_open_] >= plan_.keys[first_open_].bytes) ++first_open_;
  for (size_t k = first_open_; k < plan_.keys.size(); ++k) {
    const FetchKey& key = plan_.keys[k];
    if (next_offset_[k] >= key.bytes) continue;
    if (std::find(key.sources.begin(), key.sources.end(), source) == key.sources.end()) continue;
    out->key = k;
    out->offset = next_offset_[k];
    out->length = std::min(plan_.chunk_bytes, key.bytes - next_offset_[k]);
    next_offset_[k] += out->length;
    return true;
  }
  return false;
}

void StateFetcher::refill(size_t i, size_t depth) {
  Conn& c = conns_[i];
  Request r;
  while (!over_ && c.channel && started_ && c.outstanding.size() < depth &&
         nextChunk(c.source, &r)) {
    r.seq = ++next_seq_;
    c.outstanding.push_back(r);
    auto payload = std::make_shared<std::vector<uint8_t>>(
        encodeStateRequest(r.length, static_cast<uint8_t>(plan_.compress), plan_.keys[r.key].name));
    wire::DataHeader h = wire::dataHeader(plan_.sync_id, r.seq, wire::kDataRequest, r.offset);
    c.channel->send(h, payload->data(), static_cast<uint32_t>(payload->size()), [payload](const Status&) {});
  }
}

StateFetcher::Conn* StateFetcher::connOf(const net::DataChannel& ch) {
  for (Conn& c : conns_) {
    if (c.channel.get() == &ch) return &c;
  }
  return nullptr;
}

Result<net::Placement> StateFetcher::place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) {
  Conn* c = connOf(ch);
  if (c == nullptr || over_) return Status::invalidUsage(ch.name() + ": the fetch is over");
  if (c->outstanding.empty()) return Status::protocol(fmt::format("{}: a response nobody asked for", ch.name()));
  const Request& r = c->outstanding.front();
  if ((h.flags & wire::kDataRequest) != 0 || h.op_id != plan_.sync_id || h.phase != r.seq || h.offset != r.offset) {
    return Status::protocol(fmt::format(
        "{}: response (sync {}, request {}, offset {}) does not answer request {} (sync {}, offset {})", ch.name(),
        h.op_id, h.phase, h.offset, r.seq, plan_.sync_id, r.offset));
  }
  if ((h.flags & wire::kDataCompressed) != 0) {
    if (bytes > codec::Compressor::bound(r.length)) {
      return Status::protocol(fmt::format("{}: {} compressed bytes for {} bytes", ch.name(), bytes, r.length));
    }
    return net::Placement::stage();
  }
  if (bytes != r.length) {
    return Status::protocol(fmt::format("{}: {} bytes in answer to a request for {}", ch.name(), bytes, r.length));
  }
  return net::Placement::direct(plan_.keys[r.key].data + r.offset);
}

Status StateFetcher::deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) {
  Conn* c = connOf(ch);
  if (c == nullptr || c->outstanding.empty()) return Status::internal(ch.name() + ": delivery without a request");
  const Request r = c->outstanding.front();
  c->outstanding.pop_front();
  if ((h.flags & wire::kDataCompressed) != 0) {
    PCCL_RETURN_IF_ERROR(decompressor_.decompress(data, bytes, plan_.keys[r.key].data + r.offset, r.length)
                             .withContext(fmt::format("{}: \"{}\" at {}", ch.name(), plan_.keys[r.key].name, r.offset)));
  }
  rx_bytes_ += bytes;
  c->broken = false;  // an answer: whatever broke before has healed
  if (arrived_) arrived_(r.key, r.offset, r.length);
  refill(static_cast<size_t>(c - conns_.data()));
  maybeDone();
  return Status::ok();
}

void StateFetcher::channelClosed(net::DataChannel& ch, const Status& why) {
  if (over_) return;
  Conn* c = connOf(ch);
  if (c == nullptr) return;  // a connection already given up
  broke(static_cast<size_t>(c - conns_.data()), why.isOk() ? Status::peerLost(ch.name() + " closed the connection") : why);
}

void StateFetcher::maybeDone() {
  if (over_) return;
  for (size_t k = 0; k < plan_.keys.size(); ++k) {
    if (next_offset_[k] < plan_.keys[k].bytes) return;
  }
  if (!retry_.empty()) return;
  for (const Conn& c : conns_) {
    if (!c.outstanding.empty()) return;
  }
  finish(Status::ok());
}

void StateFetcher::finish(const Status& s) {
  if (over_) return;
  over_ = true;
  for (auto& c : conns_) {
    if (c.channel) c.channel->close(Status::ok());
  }
  Done done = std::move(done_);
  done_ = nullptr;
  if (done) done(s, rx_bytes_);
}

}  // namespace pccl::peer
