// pccl::Master: owns the event-loop thread that MasterServer runs on.
#include "pccl/master.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "master/master_server.hpp"
#include "util/log.hpp"
#include "util/secret.hpp"

namespace pccl {

class Master::Impl {
 public:
  explicit Impl(MasterConfig config)
      : server_(io_, std::move(config), [this](const MasterStats& s) {
          std::lock_guard<std::mutex> lk(stats_mu_);
          stats_ = s;
          stats_cv_.notify_all();
        }) {}
  ~Impl() { (void)stop(); }

  Status start() {
    std::lock_guard<std::mutex> lk(lifecycle_mu_);
    if (started_) return Status::invalidUsage("master already started");
    PCCL_RETURN_IF_ERROR(server_.open());
    started_ = true;
    asio::post(io_, [this] { server_.start(); });
    thread_ = std::thread([this] {
      auto guard = asio::make_work_guard(io_);
      io_.run();
    });
    return Status::ok();
  }

  Status stop() {
    std::lock_guard<std::mutex> lk(lifecycle_mu_);
    if (!started_ || stopped_) return Status::ok();
    stopped_ = true;
    std::promise<void> done;
    asio::post(io_, [this, &done] {
      server_.shutdown();
      done.set_value();
    });
    done.get_future().wait();
    io_.stop();
    if (thread_.joinable()) thread_.join();
    return Status::ok();
  }

  MasterStats stats() const {
    std::lock_guard<std::mutex> lk(stats_mu_);
    return stats_;
  }

  bool waitFor(const std::function<bool(const MasterStats&)>& pred, uint32_t timeout_ms) const {
    std::unique_lock<std::mutex> lk(stats_mu_);
    return stats_cv_.wait_for(lk, Millis(timeout_ms), [&] { return pred(stats_); });
  }

  uint16_t port() const { return started_ ? server_.port() : 0; }
  std::string address() const { return started_ ? server_.address() : std::string(); }

 private:
  asio::io_context io_;
  mutable std::mutex stats_mu_;
  mutable std::condition_variable stats_cv_;
  MasterStats stats_;
  master::MasterServer server_;
  std::mutex lifecycle_mu_;
  std::thread thread_;
  std::atomic<bool> started_{false};
  bool stopped_ = false;
};

Result<std::unique_ptr<Master>> Master::create(MasterConfig config) {
  WipeOnExit wipe(config.secret);  // what is moved on is wiped by the server once it derived its key
  if (config.heartbeat_interval_ms == 0) return Status::invalidArgument("heartbeat_interval_ms must be > 0");
  if (config.peer_timeout_ms <= config.heartbeat_interval_ms) {
    return Status::invalidArgument(fmt::format("peer_timeout_ms ({}) must exceed heartbeat_interval_ms ({})",
                                               config.peer_timeout_ms, config.heartbeat_interval_ms));
  }
  if (config.handshake_timeout_ms == 0) return Status::invalidArgument("handshake_timeout_ms must be > 0");
  if (config.max_peers == 0 || config.max_pending_handshakes == 0 || config.max_concurrent_ops == 0) {
    return Status::invalidArgument("max_peers, max_pending_handshakes and max_concurrent_ops must be > 0");
  }
  if (config.probe_budget_ms == 0 || config.probe_budget_ms > 600000) {
    return Status::invalidArgument(fmt::format("probe_budget_ms must be 1..600000, got {}", config.probe_budget_ms));
  }
  if (config.probe_bytes == 0) return Status::invalidArgument("probe_bytes must be > 0");
  if (config.auto_optimize < -1 || config.auto_optimize > 1) {
    return Status::invalidArgument(fmt::format(
        "auto_optimize must be -1 (PCCL_AUTO_OPTIMIZE, else off), 0 or 1, got {}", config.auto_optimize));
  }
  if (config.auto_optimize == -1) {
    const char* env = std::getenv("PCCL_AUTO_OPTIMIZE");
    const std::string v = env != nullptr ? env : "";
    if (!v.empty() && v != "0" && v != "1") {
      return Status::invalidArgument(fmt::format("PCCL_AUTO_OPTIMIZE must be 0 or 1, got '{}'", v));
    }
    config.auto_optimize = v == "1" ? 1 : 0;
  }
  if (config.rebuild_window_ms == 0 || config.rebuild_window_ms > 3600000) {
    return Status::invalidArgument(fmt::format("rebuild_window_ms must be 1..3600000, got {}", config.rebuild_window_ms));
  }
  if (!config.etcd_url.empty()) {
    if (config.standby || !config.state_file.empty()) {
      return Status::invalidArgument("etcd_url elects the leader: it does not go with standby or state_file");
    }
    if (config.etcd_lease_ms < 2000 || config.etcd_lease_ms > 600000) {
      return Status::invalidArgument(fmt::format("etcd_lease_ms must be 2000..600000, got {}", config.etcd_lease_ms));
    }
    if (config.etcd_prefix.empty() || config.etcd_prefix.front() != '/') {
      return Status::invalidArgument(fmt::format("etcd_prefix must start with '/', got '{}'", config.etcd_prefix));
    }
  }
  if (config.encrypt && config.secret.empty()) {
    return Status::invalidArgument("encrypt needs a shared secret: the connection keys derive from it");
  }
  return std::unique_ptr<Master>(new Master(std::make_unique<Impl>(std::move(config))));
}

Master::Master(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Master::~Master() = default;
Status Master::start() { return impl_->start(); }
uint16_t Master::port() const { return impl_->port(); }
std::string Master::address() const { return impl_->address(); }
Status Master::stop() { return impl_->stop(); }
MasterStats Master::stats() const { return impl_->stats(); }
bool Master::waitFor(const std::function<bool(const MasterStats&)>& pred, uint32_t timeout_ms) const {
  return impl_->waitFor(pred, timeout_ms);
}

}  // namespace pccl
