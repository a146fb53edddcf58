// pccl::Communicator::Impl: one peer's state and its io thread. User threads call in and wait on
// events with deadlines; everything that touches a socket runs on the io thread the communicator owns
// (MasterLink, RingPool, the p2p listener, Collectives, the shared-state server).
//
// Where each part lives:
//   communicator.cpp     the public facade, creation, the io thread and destruction, attributes
//   comm_membership.cpp  connect / updateTopology / arePeersPending / leave, and the io thread's side
//                        of the master's messages about membership (topology builds, queries, surveys)
//   comm_session.cpp     the io thread's side of the master session (peer::MasterSession, the state
//                        machine: trying the run's masters in turn, joining, coming back to a master
//                        after losing one, giving up): its hands (the MasterLink, a timer) and what the
//                        communicator does when it joined, lost its master, got it back, or gave up
//   comm_collectives.cpp startCollective and syncSharedState: checks, bookkeeping, hand-off to the io thread
#ifndef PCCL_API_COMM_IMPL_HPP_
#define PCCL_API_COMM_IMPL_HPP_

#include <fmt/format.h>

#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "api/comm_config.hpp"
#include "api/comm_stats.hpp"
#include "api/device_buffers.hpp"
#include "api/link_master_port.hpp"
#include "api/reduce_handle.hpp"
#include "api/shared_state.hpp"
#include "collective/buffer_pool.hpp"
#include "collective/collectives.hpp"
#include "net/auth.hpp"
#include "net/identity.hpp"
#include "net/listener.hpp"
#include "peer/master_link.hpp"
#include "peer/master_session.hpp"
#include "peer/peer_state.hpp"
#include "peer/link_probe.hpp"
#include "peer/relay.hpp"
#include "peer/ring_pool.hpp"
#include "pccl/communicator.hpp"

namespace pccl {

// Authentications a peer's listener runs at once beyond those its ring plan expects (probe and
// state-fetch connections, stray dialers); each ring plan raises the bound by its inbound connections.
inline constexpr uint32_t kListenerHandshakes = 64;

class Communicator::Impl : private peer::MasterSession::Io, private peer::MasterSession::Listener {
 public:
  // `config.secret` is already wiped: `key` is all the communicator keeps of it.
  Impl(CommConfig config, std::vector<net::HostPort> masters, net::HostPort listen,
       std::shared_ptr<const net::AuthKey> key);
  ~Impl() override;
  Status init();

  // ---- membership (comm_membership.cpp) ----------------------------------------------------------
  Status connect();
  Status updateTopology(bool optimize);  // optimize: pcclOptimizeTopology
  Result<bool> arePeersPending();
  Result<std::vector<LinkInfo>> links();
  Status leave();

  // ---- collectives (comm_collectives.cpp) --------------------------------------------------------
  // Every collective: the checks, the in-place copy, the hand-off to the io thread.
  Result<ReduceHandle> startCollective(const CollectiveCall& call);
  Result<SyncInfo> syncSharedState(SharedState& state, SyncStrategy strategy);

  // ---- attributes (communicator.cpp) -------------------------------------------------------------
  Topology topology() const;
  PeerId id() const;
  uint16_t listenPort() const { return listener_->port(); }
  const char* cipher() const;
  CommStats stats() const {
    CommStats s = stats_.stats();
    s.relayed_bytes = relay_->relayedBytes();  // an atomic: read from any thread
    return s;
  }
  std::string lastError() const {
    std::lock_guard<std::mutex> lk(err_mu_);
    return last_error_;
  }

  // ---- tests only (detail::CommAccess) -----------------------------------------------------------
  void postForTest(std::function<void()> fn) { asio::post(io_, std::move(fn)); }  // may block the io thread
  // Drops (hook returns false) or watches the commit round's ring messages this peer sends (tests only).
  void setRingCtlHookForTest(collective::RingCtlHook hook) {
    std::promise<void> set;
    asio::post(io_, [this, &set, &hook] {
      colls_->setCtlHook(std::move(hook));
      set.set_value();
    });
    set.get_future().wait();
  }
  // The successor link's tuner begins again at `start` connections (collective/connection_tuner.hpp).
  void restartTuningForTest(uint32_t start) {
    std::promise<void> done;
    asio::post(io_, [this, &done, start] {
      colls_->restartTuningForTest(start);
      done.set_value();
    });
    done.get_future().wait();
  }
  // Gives up every resumable ring connection of this peer, as a reset on the path would (the dialling
  // ends dial again). On the io thread (from a ring-control hook); returns how many. Tests only.
  size_t breakRingOnIoForTest(const Status& why);
  size_t breakRingForTest(const Status& why) {
    std::promise<size_t> n;
    asio::post(io_, [this, &n, &why] { n.set_value(breakRingOnIoForTest(why)); });
    return n.get_future().get();
  }
  // Resets this peer's control connection, as a middlebox would (tests only; on the io thread).
  void resetMasterLinkOnIoForTest() {
    if (link_) link_->resetForTest();
  }
  // Runs on the destroying thread once the io thread has been told to stop, before it is joined.
  void setStopHookForTest(std::function<void()> fn) { test_on_stop_ = std::move(fn); }

 private:
  static constexpr const char* kLog = "peer";
  static constexpr Millis kLeaveTimeout{2000};  // how long leave() waits for the master's acknowledgement

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

  Status leaveWith(const Status& why);  // leave(); collectives still in flight fail with `why`
  void setState(peer::PeerState to);   // requires mu_
  void teardown();                    // abandons a connect() that timed out

  // io thread: the master session (comm_session.cpp).
  static peer::MasterSession::Config sessionConfig(const CommConfig& config, std::vector<net::HostPort> masters);
  void ioStartSession();
  void registerMembershipHandlers();  // the master's messages about membership (comm_membership.cpp)
  // peer::MasterSession::Io: the session's hands.
  void dial(const net::HostPort& master) override;
  void sendJoin(peer::MasterSession::Join kind, const wire::Uuid& run_id, uint64_t term) override;
  void startHeartbeats(Millis interval, Millis timeout) override;
  void setReady(bool ready) override;
  void close() override;
  void retryAfter(Millis pause) override;
  void later(std::function<void()> fn) override;
  std::string masterName() const override;
  // peer::MasterSession::Listener: what the communicator does about it.
  void joined(const wire::JoinAccepted& m) override;
  void away(const Status& why) override;  // lost the master: collectives go on, the session looks for one
  void back(const wire::RunResumed& m, int64_t away_ms) override;
  void fatal(const Status& why) override;  // a connect() fails, or the communicator is dead
  void goFatal(const Status& s);           // the communicator is dead: everything fails with `s`
  void sendVote();
  // Blocks (mu_ held through `lk`) until the master is back, the communicator failed, or `deadline`.
  Status waitMaster(std::unique_lock<std::mutex>& lk, TimePoint deadline);
  Status onTopology(const wire::TopologyUpdate& m);
  Status onReady(const wire::TopologyReady& m);
  Status onFailed(const wire::TopologyFailed& m);

  CommConfig config_;
  size_t master_count_;  // the run's master addresses (the session tries them in turn)
  std::shared_ptr<const net::AuthKey> key_;
  // Our ring identity: the JoinRequest carries its public half, our ring hellos are signed with it.
  std::shared_ptr<const net::SigningKey> identity_ = std::make_shared<const net::SigningKey>();
  asio::io_context io_;
  asio::steady_timer retry_timer_{io_};  // io thread: the session's next attempt to reach a master
  std::thread thread_;
  std::shared_ptr<net::Listener> listener_;
  std::unique_ptr<peer::MasterLink> link_;  // io thread
  std::unique_ptr<LinkMasterPort> master_port_;  // io thread: the collectives' master, over link_
  std::unique_ptr<peer::MasterSession> session_;  // io thread: which master, joined or away, over link_
  std::unique_ptr<peer::RingPool> ring_pool_;  // io thread
  std::unique_ptr<peer::LinkProber> prober_;  // io thread
  std::unique_ptr<peer::Relay> relay_;        // io thread: the ring links this peer relays
  collective::BufferPool buffers_;          // thread-safe
  DeviceBuffers device_;                    // thread-safe; outlives colls_ (which holds its blocks)
  std::unique_ptr<collective::Collectives> colls_;  // io thread
  std::unique_ptr<SharedStateSync> sync_;   // run() on the calling thread, the rest on the io thread
  Topology building_;                       // io thread: the topology being built
  std::shared_ptr<const collective::TwoLevelRing> building_two_level_;  // io thread: its two-level plan, if any
  // io thread: this peer's own outcome of the build of building_.epoch once its connections are up (or
  // failed): sent to the master, and sent again when a master that held our place while our control
  // connection was broken repeats the TopologyUpdate (docs/protocol.md §8.4).
  struct BuildOutcome {
    uint64_t epoch = 0;
    Status status;
  };
  std::optional<BuildOutcome> build_outcome_;
  void sendBuildOutcome();
  void abandonBuild();  // mu_ held

  mutable std::mutex mu_;
  std::condition_variable cv_;
  peer::PeerState state_ = peer::PeerState::kIdle;
  Status fatal_;          // sticky: master unreachable or kicked
  Status connect_error_;  // why the last connect attempt failed before joining
  Status last_build_;     // outcome of the last ring build
  uint64_t builds_done_ = 0;
  Topology topology_;
  uint64_t next_query_ = 0;
  std::map<uint64_t, wire::MembershipStatus> answers_;  // QueryStatus replies not yet collected
  std::map<uint64_t, wire::LinkReport> link_answers_;   // LinkQuery replies not yet collected
  TimePoint probed_at_{};        // when the last ProbePlan of a survey arrived (extends the vote's deadline)
  std::set<uint64_t> waiting_;
  std::set<uint64_t> inflight_;  // tags of collectives not yet done
  bool syncing_ = false;         // a syncSharedState() call is under way
  PeerId id_{};
  // The master's absence as the calling threads see it (requires mu_): the session's away() sets it,
  // its back() clears it (the session itself is the io thread's).
  bool away_ = false;
  uint64_t losses_ = 0;  // times the master was lost: a query sent before one may have gone with it
  TimePoint away_since_{};
  uint64_t away_term_ = 0;  // the term of the master we lost: one that takes us back at it held our place
  Status away_why_;
  bool vote_optimize_ = false;  // the kind of the vote under way (sent again to a master that comes back)

  StatsRecorder stats_;  // thread-safe
  mutable std::mutex err_mu_;
  std::string last_error_;
  std::function<void()> test_on_stop_;
};

namespace detail {
// Tests reach a communicator's Impl through this (a friend of Communicator).
struct CommAccess {
  static Communicator::Impl& impl(Communicator& c) { return *c.impl_; }
};
}  // namespace detail

}  // namespace pccl

#endif  // PCCL_API_COMM_IMPL_HPP_
