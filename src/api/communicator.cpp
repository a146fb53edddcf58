// pccl::Communicator: the public facade over Communicator::Impl (api/comm_impl.hpp), and the Impl's
// life: creation, the io thread, destruction, and the attributes any thread may read.
#include "pccl/communicator.hpp"

#include "api/comm_impl.hpp"
#include "net/resume_config.hpp"
#include "net/tcp_rto.hpp"
#include "util/log.hpp"
#include "util/secret.hpp"

namespace pccl {

Communicator::Impl::Impl(CommConfig config, std::vector<net::HostPort> masters, net::HostPort listen,
                         std::shared_ptr<const net::AuthKey> key)
    : config_(std::move(config)),
      master_count_(masters.size()),
      key_(std::move(key)),
      session_(std::make_unique<peer::MasterSession>(sessionConfig(config_, std::move(masters)),
                                                     static_cast<peer::MasterSession::Io&>(*this),
                                                     static_cast<peer::MasterSession::Listener&>(*this))),
      ring_pool_(std::make_unique<peer::RingPool>(io_, key_, identity_, Millis(config_.handshake_timeout_ms),
                                                  Millis(config_.connect_timeout_ms), config_.same_host_reads == 1)),
      prober_(std::make_unique<peer::LinkProber>(io_, key_, identity_, Millis(config_.handshake_timeout_ms))),
      relay_(std::make_unique<peer::Relay>(Millis(config_.handshake_timeout_ms))),
      colls_(std::make_unique<collective::Collectives>(io_, &buffers_,
                                                       [this](const Status& s) { ring_pool_->reset(s); })),
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
  lc.max_pending_handshakes = kListenerHandshakes;  // raised with each ring plan (comm_membership.cpp)
  listener_ = std::make_shared<net::Listener>(io_, lc);
  ring_pool_->setAdoptInbound([this](net::Tcp::socket s) { listener_->adopt(std::move(s)); });
  colls_->setReadHook([this](uint64_t bytes) { stats_.sameHostRead(bytes); });
  // A broken ring connection waits for a new one as long as the master waits for a silent peer
  // (docs/algorithms.md §6, "Network faults"): a peer really gone is removed by then anyway.
  peer::RingPool::Resume resume;
  resume.on = net::ringResumeEnabled();
  resume.wait = Millis(uint64_t{config_.peer_timeout_ms} + net::tcpRecoveryMs() + config_.heartbeat_interval_ms);
  resume.stall = Millis(net::ringStallMs());
  resume.resumed = [this](uint64_t resent, Millis stalled) {
    stats_.ringResumed(resent, static_cast<uint64_t>(stalled.count()));
  };
  ring_pool_->setResume(std::move(resume));
  colls_->setReconnects(config_.master_reconnect_ms > 0);
  colls_->setTuning(tunedConnections(config_),
                    [this](uint32_t active, bool changed) { stats_.connectionsTuned(active, changed); });
}

// Destruction ends every request, whatever the io thread is doing: a graceful leave first (bounded
// by kLeaveTimeout), then the io thread is stopped and joined, and its objects are shut down here —
// once it has been joined no other thread touches them. What was still queued for it (an all-reduce
// handed over but not yet submitted, a step of leave()) runs here too, after the collectives were
// closed, so every ReduceHandle completes (with an error) before any member it reports to is gone.
Communicator::Impl::~Impl() {
  if (!thread_.joinable()) return;  // init() failed before the io thread started
  const Status why = Status::invalidUsage("the communicator was destroyed");
  (void)leaveWith(why);
  io_.stop();
  if (test_on_stop_) test_on_stop_();
  thread_.join();
  listener_->close();
  colls_->linkLost(why);  // fails every operation in flight, and every submission from now on
  sync_->shutdown(why);
  io_.restart();
  io_.poll();  // what was queued: submissions fail at once; leave()'s steps run
  session_.reset();
  master_port_.reset();
  link_.reset();
  prober_.reset();
  relay_.reset();  // closes the connections it relays
  ring_pool_.reset();  // closes the ring's connections, which report to colls_
  io_.poll();     // the completions of what was just closed
  colls_.reset();
}

Status Communicator::Impl::init() {
  PCCL_RETURN_IF_ERROR(listener_->open());
  listener_->start([this](net::Authenticated a) {
    if (a.role == wire::Role::kStateFetch) return sync_->adopt(std::move(a.link), epoch());
    if (a.role == wire::Role::kProbe) return prober_->adopt(std::move(a.link));
    if (a.role == wire::Role::kRelay) return relay_->adopt(std::move(a.link));
    if (a.role != wire::Role::kPeerToPeer) {
      PCCL_LOG_WARN(kLog, "dropping a master-role connection sent to a peer");
      return;
    }
    ring_pool_->adopt(std::move(a.link));
  });
  thread_ = std::thread([this] {
    auto guard = asio::make_work_guard(io_);
    io_.run();
  });
  return Status::ok();
}

size_t Communicator::Impl::breakRingOnIoForTest(const Status& why) {
  std::vector<std::shared_ptr<net::DataChannel>> all = ring_pool_->outbound();
  for (const auto& ch : ring_pool_->inbound()) all.push_back(ch);
  for (const auto& link : ring_pool_->extraLinks()) all.insert(all.end(), link.begin(), link.end());
  size_t n = 0;
  for (const auto& ch : all) {
    if (!ch || !ch->resumable() || !ch->isOpen() || ch->broken()) continue;
    ch->detach(why);
    ++n;
  }
  return n;
}

Topology Communicator::Impl::topology() const {
  std::lock_guard<std::mutex> lk(mu_);
  return topology_;
}

PeerId Communicator::Impl::id() const {
  std::lock_guard<std::mutex> lk(mu_);
  return id_;
}

const char* Communicator::Impl::cipher() const {
  return key_->encrypt() ? net::cipherName(net::preferredCipher()) : "none";
}

// ---- Communicator ---------------------------------------------------------------------------------

Result<std::unique_ptr<Communicator>> Communicator::create(CommConfig config) {
  WipeOnExit wipe(config.secret);  // on every path: only the run key derived from it is kept
  PCCL_RETURN_IF_ERROR(net::initCrypto());
  if (config.master_address.empty()) return Status::invalidArgument("master_address is required (HOST:PORT)");
  PCCL_ASSIGN_OR_RETURN(std::vector<net::HostPort> masters, parseMasterList(config.master_address));
  PCCL_ASSIGN_OR_RETURN(net::HostPort listen, net::parseHostPort(config.listen_address, "listen_address"));
  PCCL_RETURN_IF_ERROR(checkCommConfig(config));
  PCCL_RETURN_IF_ERROR(resolveCredentials(config));
  PCCL_RETURN_IF_ERROR(resolveGatherBytes(config));
  PCCL_RETURN_IF_ERROR(resolveSameHostReads(config));
  PCCL_RETURN_IF_ERROR(resolveInbound(config));
  PCCL_RETURN_IF_ERROR(resolveReconnect(config));
  PCCL_RETURN_IF_ERROR(resolveConnections(config));
  PCCL_RETURN_IF_ERROR(resolveRegion(config));
  PCCL_RETURN_IF_ERROR(resolveAlgorithm(config));
  auto key = std::make_shared<const net::AuthKey>(config.secret, config.encrypt);
  wipeSecret(config.secret);
  auto impl = std::make_unique<Impl>(std::move(config), std::move(masters), std::move(listen), std::move(key));
  PCCL_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;
Status Communicator::connect() { return impl_->connect(); }
Status Communicator::updateTopology() { return impl_->updateTopology(false); }
Status Communicator::optimizeTopology() { return impl_->updateTopology(true); }
Result<std::vector<LinkInfo>> Communicator::links() { return impl_->links(); }
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
  return impl_->startCollective(collectiveCall(wire::Collective::kAllReduce, send, recv, count, dtype, op, 0, options));
}
Result<ReduceHandle> Communicator::broadcastAsync(const void* send, void* recv, size_t count, DataType dtype,
                                                 uint32_t root, const ReduceOptions& options) {
  return impl_->startCollective(
      collectiveCall(wire::Collective::kBroadcast, send, recv, count, dtype, RedOp::kSum, root, options));
}
Result<ReduceHandle> Communicator::allGatherAsync(const void* send, void* recv, size_t send_count, DataType dtype,
                                                  const ReduceOptions& options) {
  return impl_->startCollective(
      collectiveCall(wire::Collective::kAllGather, send, recv, send_count, dtype, RedOp::kSum, 0, options));
}
Result<ReduceHandle> Communicator::reduceScatterAsync(const void* send, void* recv, size_t recv_count, DataType dtype,
                                                      RedOp op, const ReduceOptions& options) {
  return impl_->startCollective(
      collectiveCall(wire::Collective::kReduceScatter, send, recv, recv_count, dtype, op, 0, options));
}
Result<ReduceHandle> Communicator::barrierAsync(const ReduceOptions& options) {
  return impl_->startCollective(
      collectiveCall(wire::Collective::kBarrier, nullptr, nullptr, 0, DataType::kFloat32, RedOp::kSum, 0, options));
}

// The blocking forms: the asynchronous one, waited for.
namespace {
Result<ReduceInfo> waited(Result<ReduceHandle> started) {
  if (!started.isOk()) return started.status();
  return started->wait();
}
}  // namespace
Result<ReduceInfo> Communicator::allReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                                           const ReduceOptions& options) {
  return waited(allReduceAsync(send, recv, count, dtype, op, options));
}
Result<ReduceInfo> Communicator::broadcast(const void* send, void* recv, size_t count, DataType dtype, uint32_t root,
                                           const ReduceOptions& options) {
  return waited(broadcastAsync(send, recv, count, dtype, root, options));
}
Result<ReduceInfo> Communicator::allGather(const void* send, void* recv, size_t send_count, DataType dtype,
                                           const ReduceOptions& options) {
  return waited(allGatherAsync(send, recv, send_count, dtype, options));
}
Result<ReduceInfo> Communicator::reduceScatter(const void* send, void* recv, size_t recv_count, DataType dtype, RedOp op,
                                               const ReduceOptions& options) {
  return waited(reduceScatterAsync(send, recv, recv_count, dtype, op, options));
}
Result<ReduceInfo> Communicator::barrier(const ReduceOptions& options) { return waited(barrierAsync(options)); }
Result<SyncInfo> Communicator::syncSharedState(SharedState& state, SyncStrategy strategy) {
  return impl_->syncSharedState(state, strategy);
}

}  // namespace pccl
