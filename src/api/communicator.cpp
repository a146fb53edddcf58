// pccl::Communicator: user threads call in and wait on events with deadlines; everything that touches
// a socket runs on one io thread owned by the communicator (MasterLink, RingPool, the p2p listener).
#include "pccl/communicator.hpp"
#include "pccl/version.h"

#include <fmt/format.h>

#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include "api/comm_config.hpp"
#include "api/comm_stats.hpp"
#include "api/device_buffers.hpp"
#include "api/reduce_handle.hpp"
#include "api/shared_state.hpp"
#include "codec/dtype.hpp"
#include "collective/buffer_pool.hpp"
#include "collective/collectives.hpp"
#include "net/auth.hpp"
#include "net/identity.hpp"
#include "net/listener.hpp"
#include "peer/master_link.hpp"
#include "peer/peer_state.hpp"
#include "peer/ring_pool.hpp"
#include "util/log.hpp"
#include "util/secret.hpp"

namespace pccl {

using peer::PeerState;

namespace {
constexpr const char* kLog = "peer";
constexpr const char* kClientVersion = "pccl " PCCL_VERSION_STRING;
constexpr Millis kLeaveTimeout{2000};
}  // namespace

class Communicator::Impl {
 public:
  // `config.secret` is already wiped: `key` is all the communicator keeps of it.
  Impl(CommConfig config, net::HostPort master, net::HostPort listen, std::shared_ptr<const net::AuthKey> key)
      : config_(std::move(config)),
        master_addr_(std::move(master)),
        key_(std::move(key)),
        pool_(std::make_unique<peer::RingPool>(io_, key_, identity_, Millis(config_.handshake_timeout_ms),
                                               Millis(config_.connect_timeout_ms))),
        colls_(std::make_unique<collective::Collectives>(io_, &buffers_,
                                                         [this](const Status& s) { pool_->reset(s); })),
        sync_(std::make_unique<SharedStateSync>(
            io_, key_,
            SharedStateSync::Hooks{[this](const wire::SyncAnnounce& m) {
                                     if (link_) link_->send(m, epoch());
                                   },
                                   [this](const wire::SyncDone& m) {
                                     if (link_) link_->send(m, epoch());
                                   }})) {
    net::ListenerConfig lc;
    lc.address = std::move(listen);
    lc.key = key_;
    lc.handshake_timeout = Millis(config_.handshake_timeout_ms);
    lc.name = "peer-listener";
    listener_ = std::make_shared<net::Listener>(io_, lc);
  }

  ~Impl() {
    if (!thread_.joinable()) return;  // init() failed before the io thread started
    (void)leave();
    std::promise<void> done;
    asio::post(io_, [this, &done] {
      listener_->close();
      colls_->failAll(Status::invalidUsage("the communicator was destroyed"));
      sync_->shutdown(Status::invalidUsage("the communicator was destroyed"));
      colls_->setLink(nullptr);
      link_.reset();
      pool_.reset();  // closes the ring's connections, which report to colls_
      colls_.reset();
      done.set_value();
    });
    done.get_future().wait_for(kLeaveTimeout);
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Status init() {
    PCCL_RETURN_IF_ERROR(listener_->open());
    listener_->start([this](net::Authenticated a) {
      if (a.role == wire::Role::kStateFetch) return sync_->adopt(std::move(a.link), epoch());
      if (a.role != wire::Role::kPeerToPeer) {
        PCCL_LOG_WARN(kLog, "dropping a master-role connection sent to a peer");
        return;
      }
      pool_->adopt(std::move(a.link));
    });
    thread_ = std::thread([this] {
      auto guard = asio::make_work_guard(io_);
      io_.run();
    });
    return Status::ok();
  }

  // ---- user-facing calls ------------------------------------------------------------------------

  Status connect() {
    std::unique_lock<std::mutex> lk(mu_);
    if (!fatal_.isOk()) return record(fatal_);
    if (state_ != PeerState::kIdle) {
      return record(Status::invalidUsage(fmt::format("connect() called while {}", peer::peerStateName(state_))));
    }
    setState(PeerState::kConnecting);
    connect_error_ = Status::ok();
    const uint64_t builds0 = builds_done_;
    asio::post(io_, [this] { ioStartSession(); });
    const TimePoint deadline = deadlineAfterMs(config_.connect_timeout_ms);
    bool done = cv_.wait_until(lk, deadline, [&] {
      return state_ == PeerState::kFailed || (state_ == PeerState::kIdle && !connect_error_.isOk()) ||
             builds_done_ > builds0;
    });
    if (state_ == PeerState::kFailed) return record(fatal_);
    if (state_ == PeerState::kIdle) return record(connect_error_);
    if (done) return record(last_build_);
    std::string where = peer::peerStateName(state_);
    lk.unlock();
    teardown();
    return record(Status::timeout(fmt::format(
        "not admitted into the ring within {} ms (still {}); accepted peers admit pending ones by all calling "
        "pcclUpdateTopology",
        config_.connect_timeout_ms, where)));
  }

  Status updateTopology() {
    std::unique_lock<std::mutex> lk(mu_);
    if (!fatal_.isOk()) return record(fatal_);
    if (state_ != PeerState::kMember) {
      return record(Status::invalidUsage(
          fmt::format("updateTopology() needs a connected member; this peer is {}", peer::peerStateName(state_))));
    }
    if (!inflight_.empty() || syncing_) {
      return record(Status::invalidUsage(fmt::format(
          "updateTopology() while {} collective(s){} are in flight: wait for them first", inflight_.size(),
          syncing_ ? " and a shared-state sync" : "")));
    }
    setState(PeerState::kVoting);
    const uint64_t builds0 = builds_done_;
    asio::post(io_, [this] {
      if (link_) link_->send(wire::VoteUpdate{}, epoch());
    });
    const TimePoint deadline = deadlineAfterMs(config_.connect_timeout_ms);
    bool done = cv_.wait_until(lk, deadline, [&] { return state_ == PeerState::kFailed || builds_done_ > builds0; });
    if (state_ == PeerState::kFailed) return record(fatal_);
    if (done) return record(last_build_);
    lk.unlock();
    asio::post(io_, [this] {
      if (link_) link_->send(wire::WithdrawVote{}, epoch());
      std::lock_guard<std::mutex> g(mu_);
      if (state_ == PeerState::kVoting) setState(PeerState::kMember);
      cv_.notify_all();
    });
    return record(Status::timeout(fmt::format(
        "topology update not agreed within {} ms: every accepted peer must call pcclUpdateTopology",
        config_.connect_timeout_ms)));
  }

  // One round trip to the master, so the answer reflects its state at the time of the call.
  Result<bool> arePeersPending() {
    std::unique_lock<std::mutex> lk(mu_);
    if (!fatal_.isOk()) return record(fatal_);
    if (!peer::isJoined(state_)) {
      return record(Status::invalidUsage(fmt::format("not connected (state {})", peer::peerStateName(state_))));
    }
    const uint64_t id = ++next_query_;
    waiting_.insert(id);
    asio::post(io_, [this, id] {
      if (link_) link_->send(wire::QueryStatus{id}, epoch());
    });
    bool answered = cv_.wait_for(lk, Millis(config_.peer_timeout_ms), [&] {
      return !fatal_.isOk() || answers_.count(id) != 0;
    });
    waiting_.erase(id);
    if (!fatal_.isOk()) return record(fatal_);
    if (!answered) {
      return record(Status::masterUnreachable(
          fmt::format("master did not answer a status query within {} ms", config_.peer_timeout_ms)));
    }
    wire::MembershipStatus st = answers_[id];
    answers_.erase(id);
    return st.pending > 0 || st.vote_open != 0 || st.stale != 0;
  }

  Result<ReduceHandle> allReduceAsync(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                                      const ReduceOptions& o) {
    PCCL_RETURN_IF_ERROR(record(checkReduceArgs(send, recv, count, dtype, op, o)));
    collective::ReduceRequest req;
    req.submitted = Clock::now();
    req.tag = o.tag;
    req.count = count;
    req.dtype = static_cast<codec::DType>(dtype);
    req.op = static_cast<codec::RedOp>(op);
    req.quant = static_cast<codec::Quant>(o.quant);
    req.compress = o.compress;
    req.segment_bytes = config_.segment_bytes;
    req.timeout = Millis(config_.op_timeout_ms);
    req.output = static_cast<uint8_t*>(recv);
    req.input = static_cast<const uint8_t*>(send);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!fatal_.isOk()) return record(fatal_);
      if (state_ != PeerState::kMember) {
        return record(Status::invalidUsage(
            fmt::format("allReduce needs a connected member with a ring; this peer is {}", peer::peerStateName(state_))));
      }
      if (syncing_) return record(Status::invalidUsage("allReduce while a shared-state sync runs on this peer"));
      if (inflight_.size() >= config_.max_concurrent_ops) {
        return record(Status::invalidUsage(fmt::format(
            "{} all-reduces are in flight on this peer, its limit (max_concurrent_ops): wait for one first",
            inflight_.size())));
      }
      if (inflight_.count(o.tag) != 0) {
        return record(Status::invalidUsage(fmt::format(
            "tag {} is still in flight on this peer: concurrent collectives need distinct tags", o.tag)));
      }
      inflight_.insert(o.tag);
    }
    const size_t bytes = count * codec::dtypeSize(req.dtype);
    if (o.location == BufferLocation::kDevice && count > 0) {
      Status st = device_.prepare(send, recv, bytes, req);
      if (!st.isOk()) {
        std::lock_guard<std::mutex> lk(mu_);
        inflight_.erase(o.tag);
        return record(st);
      }
    } else if (send == recv && count > 0) {
      // In place: the ring reads a saved copy of the input, so a failure can put it back.
      req.saved = buffers_.acquire(bytes);
      std::memcpy(req.saved.data.get(), recv, bytes);
      req.input = req.saved.data.get();
    }
    auto state = std::make_shared<ReduceHandle::State>();
    const uint64_t tag = o.tag;
    stats_.reduceStarted(tag);
    auto done = [this, state, tag, bytes](const collective::ReduceOutcome& out) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        inflight_.erase(tag);
      }
      stats_.reduceEnded(tag, out.status, out.tx_bytes, out.rx_bytes, out.seconds, bytes);
      if (!out.status.isOk()) (void)record(out.status);
      std::lock_guard<std::mutex> lk(state->mu);
      state->done = true;
      state->status = out.status;
      state->info = ReduceInfo{out.tx_bytes, out.rx_bytes, out.world_size, out.seconds};
      state->cv.notify_all();
    };
    auto shared_req = std::make_shared<collective::ReduceRequest>(std::move(req));
    asio::post(io_, [this, shared_req, done] { colls_->submit(std::move(*shared_req), done); });
    return ReduceHandle(state);
  }

  Result<SyncInfo> syncSharedState(SharedState& state, SyncStrategy strategy) {
    SyncContext ctx;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!fatal_.isOk()) return record(fatal_);
      if (state_ != PeerState::kMember) {
        return record(Status::invalidUsage(fmt::format(
            "syncSharedState needs a connected member with a ring; this peer is {}", peer::peerStateName(state_))));
      }
      if (!inflight_.empty() || syncing_) {
        return record(Status::invalidUsage(fmt::format(
            "syncSharedState while {} collective(s){} are in flight on this peer: wait for them first",
            inflight_.size(), syncing_ ? " and another sync" : "")));
      }
      syncing_ = true;
      ctx.epoch = topology_.epoch;
      ctx.self = id_;
      ctx.ring = topology_.ring;
    }
    ctx.connections = config_.connections_per_peer;
    ctx.same_host_connections = config_.same_host_connections;
    ctx.timeout = Millis(config_.op_timeout_ms);
    ctx.handshake_timeout = Millis(config_.handshake_timeout_ms);
    auto r = sync_->run(state, strategy, ctx);
    stats_.syncEnded(r.status(), r.isOk() ? r->tx_bytes : 0, r.isOk() ? r->rx_bytes : 0);
    std::lock_guard<std::mutex> lk(mu_);
    syncing_ = false;
    return record(std::move(r));
  }

  Status leave() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (state_ == PeerState::kLeft || state_ == PeerState::kIdle || state_ == PeerState::kFailed) {
        return Status::ok();
      }
    }
    std::promise<void> left;
    auto fut = left.get_future();
    asio::post(io_, [this, &left] {
      colls_->failAll(Status::invalidUsage("the communicator left the run"));
      pool_->reset(Status::ok());
      if (!link_) return left.set_value();
      link_->leave(epoch(), [&left] { left.set_value(); });
    });
    fut.wait_for(kLeaveTimeout);
    // The io thread may still hold `left` if the wait timed out: make sure it has let go of it.
    std::promise<void> fence;
    asio::post(io_, [this, &fence] {
      if (link_) link_->close();
      fence.set_value();
    });
    fence.get_future().wait();
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ != PeerState::kFailed) setState(PeerState::kLeft);
    return Status::ok();
  }

  Topology topology() const {
    std::lock_guard<std::mutex> lk(mu_);
    return topology_;
  }
  PeerId id() const {
    std::lock_guard<std::mutex> lk(mu_);
    return id_;
  }
  uint16_t listenPort() const { return listener_->port(); }
  const char* cipher() const { return key_->encrypt() ? net::cipherName(net::preferredCipher()) : "none"; }
  CommStats stats() const { return stats_.stats(); }
  std::string lastError() const {
    std::lock_guard<std::mutex> lk(err_mu_);
    return last_error_;
  }

 private:
  // Requires mu_ (or the value is only read on the io thread).
  uint64_t epoch() const { return topology_.epoch; }

  template <typename T>
  T record(T result) {  // remembers the detail of a failure for lastError(); requires mu_ not necessarily held
    const Status& s = statusOf(result);
    if (!s.isOk()) {
      std::string text = s.toString();
      std::unique_lock<std::mutex> lk(err_mu_);
      last_error_ = std::move(text);
    }
    return result;
  }
  static const Status& statusOf(const Status& s) { return s; }
  template <typename V>
  static const Status& statusOf(const Result<V>& r) { return r.status(); }

  void setState(PeerState to) {  // requires mu_
    if (!peer::isLegalTransition(state_, to)) {
      PCCL_LOG_ERROR(kLog, "illegal state transition {} -> {} (ignored)", peer::peerStateName(state_),
                     peer::peerStateName(to));
      return;
    }
    PCCL_LOG_DEBUG(kLog, "{} -> {}", peer::peerStateName(state_), peer::peerStateName(to));
    state_ = to;
    cv_.notify_all();
  }

  // Abandons a connect() that timed out: back to kIdle so connect() may be called again.
  void teardown() {
    std::promise<void> done;
    asio::post(io_, [this, &done] {
      colls_->failAll(Status::timeout("connect() gave up"));
      pool_->reset(Status::ok());
      if (link_) link_->close();
      std::lock_guard<std::mutex> lk(mu_);
      if (state_ != PeerState::kFailed) {
        state_ = PeerState::kIdle;  // deliberate reset from any joined state
        connect_error_ = Status::ok();
        cv_.notify_all();
      }
      done.set_value();
    });
    done.get_future().wait();
  }

  // ---- io thread --------------------------------------------------------------------------------

  void ioStartSession() {
    link_ = std::make_unique<peer::MasterLink>(io_, key_, Millis(config_.handshake_timeout_ms));
    colls_->setLink(link_.get());
    wire::Dispatcher& d = link_->dispatcher();
    d.on<wire::OpStart>([this](const wire::FrameHeader&, const wire::OpStart& m) {
      colls_->onStart(m);
      return Status::ok();
    });
    d.on<wire::OpAbort>([this](const wire::FrameHeader&, const wire::OpAbort& m) {
      colls_->onAbort(m);
      return Status::ok();
    });
    d.on<wire::OpComplete>([this](const wire::FrameHeader&, const wire::OpComplete& m) {
      colls_->onComplete(m);
      return Status::ok();
    });
    d.on<wire::SyncPlan>([this](const wire::FrameHeader&, const wire::SyncPlan& m) {
      sync_->onPlan(m);
      return Status::ok();
    });
    d.on<wire::SyncComplete>([this](const wire::FrameHeader&, const wire::SyncComplete& m) {
      sync_->onComplete(m);
      return Status::ok();
    });
    d.on<wire::JoinAccepted>([this](const wire::FrameHeader&, const wire::JoinAccepted& m) { return onJoined(m); });
    d.on<wire::TopologyUpdate>([this](const wire::FrameHeader&, const wire::TopologyUpdate& m) { return onTopology(m); });
    d.on<wire::TopologyReady>([this](const wire::FrameHeader&, const wire::TopologyReady& m) { return onReady(m); });
    d.on<wire::TopologyFailed>([this](const wire::FrameHeader&, const wire::TopologyFailed& m) { return onFailed(m); });
    d.on<wire::MembershipStatus>([this](const wire::FrameHeader&, const wire::MembershipStatus& m) {
      std::lock_guard<std::mutex> lk(mu_);
      if (m.request_id == 0 || m.request_id > next_query_) return Status::protocol("unsolicited MembershipStatus");
      if (waiting_.count(m.request_id) != 0) answers_[m.request_id] = m;
      cv_.notify_all();
      return Status::ok();
    });
    d.on<wire::PeerLeft>([this](const wire::FrameHeader&, const wire::PeerLeft& m) {
      PCCL_LOG_INFO(kLog, "peer={} epoch={}: peer {} left the run{}{}", wire::shortId(id_), epoch(), wire::shortId(m.peer_id), m.detail.empty() ? "" : ": ", m.detail);
      return Status::ok();
    });
    link_->open(
        master_addr_,
        [this](const Status& s) {
          if (!s.isOk()) {
            std::lock_guard<std::mutex> lk(mu_);
            connect_error_ = s;
            if (state_ == PeerState::kConnecting) setState(PeerState::kIdle);
            return;
          }
          wire::JoinRequest join;
          join.p2p_port = listener_->port();
          join.advertise_host = config_.advertise_host;
          join.group = config_.peer_group;
          join.connections = config_.connections_per_peer;
          join.host_connections =
              config_.same_host_connections != 0 ? config_.same_host_connections : config_.connections_per_peer;
          join.ring_key = identity_->publicKey();
          join.client_version = kClientVersion;
          link_->send(join, 0);
        },
        [this](const Status& s) { onLost(s); });
  }

  Status onJoined(const wire::JoinAccepted& m) {
    Millis interval(std::min(config_.heartbeat_interval_ms, m.heartbeat_interval_ms));
    Millis timeout(std::max<uint64_t>(config_.peer_timeout_ms, 2ull * m.heartbeat_interval_ms));
    link_->startHeartbeats(interval, timeout);
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ != PeerState::kConnecting) return Status::protocol("JoinAccepted while not joining");
    id_ = m.peer_id;
    colls_->setName("peer=" + wire::shortId(id_));
    stats_.setPeer(wire::shortId(id_));
    PCCL_LOG_INFO(kLog, "peer={}: joined, pending admission", wire::shortId(id_));
    setState(PeerState::kPending);
    return Status::ok();
  }

  Status onTopology(const wire::TopologyUpdate& m) {
    bool found = false;
    for (const auto& mi : m.ring) found = found || mi.id == id_;
    if (!found) return Status::protocol(fmt::format("TopologyUpdate for epoch {} does not include us", m.epoch));
    building_ = topologyFrom(m.ring, id_, m.epoch);
    {
      std::lock_guard<std::mutex> lk(mu_);
      setState(PeerState::kBuildingRing);
    }
    colls_->clearRing();
    peer::RingPlan plan = peer::planRing(m.ring, id_, m.epoch);
    building_.successor_connections = plan.successor_connections;
    building_.predecessor_connections = plan.predecessor_connections;
    pool_->build(plan, [this](uint64_t epoch, const Status& s) {
      if (!link_) return;
      if (s.isOk()) {
        link_->send(wire::P2PReady{epoch}, epoch);
      } else {
        PCCL_LOG_WARN(kLog, "peer={} epoch={}: ring build failed: {}", wire::shortId(id_), epoch, s.toString());
        link_->send(wire::P2PFailed{epoch, static_cast<uint16_t>(s.code()), s.message()}, epoch);
      }
    });
    return Status::ok();
  }

  Status onReady(const wire::TopologyReady& m) {
    if (m.epoch != building_.epoch) return Status::ok();
    colls_->setRing(building_.epoch, building_.group_rank, building_.group_world_size, pool_->outbound(),
                    pool_->inbound());
    std::lock_guard<std::mutex> lk(mu_);
    topology_ = building_;
    last_build_ = Status::ok();
    ++builds_done_;
    stats_.ringInstalled(topology_.epoch);
    PCCL_LOG_INFO(kLog, "peer={} epoch={}: ring ready: rank {} of {} (group rank {} of {})", wire::shortId(id_),
                  topology_.epoch, topology_.rank, topology_.world_size, topology_.group_rank,
                  topology_.group_world_size);
    setState(PeerState::kMember);
    return Status::ok();
  }

  Status onFailed(const wire::TopologyFailed& m) {
    colls_->clearRing();
    pool_->reset(Status::ok());
    std::lock_guard<std::mutex> lk(mu_);
    last_build_ = Status(wire::codeFromWire(m.code, Code::kPeerLost),
                         fmt::format("topology update to epoch {} failed: {}", m.epoch, m.reason));
    ++builds_done_;
    setState(PeerState::kMember);
    return Status::ok();
  }

  void onLost(const Status& s) {
    colls_->linkLost(s);
    pool_->reset(Status::ok());
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ == PeerState::kConnecting) {
      connect_error_ = s;
      setState(PeerState::kIdle);
      return;
    }
    if (state_ == PeerState::kLeft || state_ == PeerState::kIdle || state_ == PeerState::kFailed) return;
    PCCL_LOG_WARN(kLog, "peer={} epoch={}: {}", wire::shortId(id_), topology_.epoch, s.toString());
    sync_->linkLost(s);
    fatal_ = s;
    setState(PeerState::kFailed);
  }

  CommConfig config_;
  net::HostPort master_addr_;
  std::shared_ptr<const net::AuthKey> key_;
  // Our ring identity: the JoinRequest carries its public half, our ring hellos are signed with it.
  std::shared_ptr<const net::SigningKey> identity_ = std::make_shared<const net::SigningKey>();
  asio::io_context io_;
  std::thread thread_;
  std::shared_ptr<net::Listener> listener_;
  std::unique_ptr<peer::MasterLink> link_;  // io thread
  std::unique_ptr<peer::RingPool> pool_;    // io thread
  collective::BufferPool buffers_;          // thread-safe
  DeviceBuffers device_;                    // thread-safe; outlives colls_ (which holds its blocks)
  std::unique_ptr<collective::Collectives> colls_;  // io thread
  std::unique_ptr<SharedStateSync> sync_;   // run() on the calling thread, the rest on the io thread
  Topology building_;                       // io thread: the topology being built

  mutable std::mutex mu_;
  std::condition_variable cv_;
  PeerState state_ = PeerState::kIdle;
  Status fatal_;          // sticky: master unreachable or kicked
  Status connect_error_;  // why the last connect attempt failed before joining
  Status last_build_;     // outcome of the last ring build
  uint64_t builds_done_ = 0;
  Topology topology_;
  uint64_t next_query_ = 0;
  std::map<uint64_t, wire::MembershipStatus> answers_;  // QueryStatus replies not yet collected
  std::set<uint64_t> waiting_;
  std::set<uint64_t> inflight_;  // tags of collectives not yet done
  bool syncing_ = false;         // a syncSharedState() call is under way
  PeerId id_{};

  StatsRecorder stats_;  // thread-safe
  mutable std::mutex err_mu_;
  std::string last_error_;
};

// ---- Communicator ---------------------------------------------------------------------------------

Result<std::unique_ptr<Communicator>> Communicator::create(CommConfig config) {
  WipeOnExit wipe(config.secret);  // on every path: only the run key derived from it is kept
  PCCL_RETURN_IF_ERROR(net::initCrypto());
  if (config.master_address.empty()) return Status::invalidArgument("master_address is required (HOST:PORT)");
  PCCL_ASSIGN_OR_RETURN(net::HostPort master, net::parseHostPort(config.master_address, "master_address"));
  PCCL_ASSIGN_OR_RETURN(net::HostPort listen, net::parseHostPort(config.listen_address, "listen_address"));
  PCCL_RETURN_IF_ERROR(checkCommConfig(config));
  PCCL_RETURN_IF_ERROR(resolveCredentials(config));
  auto key = std::make_shared<const net::AuthKey>(config.secret, config.encrypt);
  wipeSecret(config.secret);
  auto impl = std::make_unique<Impl>(std::move(config), std::move(master), std::move(listen), std::move(key));
  PCCL_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;
Status Communicator::connect() { return impl_->connect(); }
Status Communicator::updateTopology() { return impl_->updateTopology(); }
Result<bool> Communicator::arePeersPending() { return impl_->arePeersPending(); }
Topology Communicator::topology() const { return impl_->topology(); }
PeerId Communicator::id() const { return impl_->id(); }
uint16_t Communicator::listenPort() const { return impl_->listenPort(); }
const char* Communicator::cipher() const { return impl_->cipher(); }
CommStats Communicator::stats() const { return impl_->stats(); }
std::string Communicator::lastError() const { return impl_->lastError(); }
Status Communicator::leave() { return impl_->leave(); }
Result<ReduceHandle> Communicator::allReduceAsync(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                                                  const ReduceOptions& options) {
  return impl_->allReduceAsync(send, recv, count, dtype, op, options);
}
Result<SyncInfo> Communicator::syncSharedState(SharedState& state, SyncStrategy strategy) {
  return impl_->syncSharedState(state, strategy);
}
Result<ReduceInfo> Communicator::allReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                                           const ReduceOptions& options) {
  PCCL_ASSIGN_OR_RETURN(ReduceHandle h, impl_->allReduceAsync(send, recv, count, dtype, op, options));
  return h.wait();
}

}  // namespace pccl
