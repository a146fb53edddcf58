// The master's network side: accepts authenticated peers, feeds their messages to Membership,
// delivers its effects, and runs heartbeats in both directions.
// Thread: every member runs on io_ (one thread, owned by pccl::Master).
#ifndef PCCL_MASTER_MASTER_SERVER_HPP_
#define PCCL_MASTER_MASTER_SERVER_HPP_

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "master/etcd_leadership.hpp"
#include "master/membership.hpp"
#include "master/op_coordinator.hpp"
#include "master/op_resolver.hpp"
#include "master/run_recovery.hpp"
#include "master/sync_coordinator.hpp"
#include "net/connection.hpp"
#include "net/listener.hpp"
#include "pccl/master.hpp"
#include "wire/dispatch.hpp"

namespace pccl::master {

class MasterServer {
 public:
  using StatsSink = std::function<void(const MasterStats&)>;
  MasterServer(asio::io_context& io, MasterConfig config, StatsSink on_stats);
  ~MasterServer();

  Status open();   // binds; any thread, before the loop runs
  void start();    // io thread
  void shutdown(); // io thread: closes everything
  uint16_t port() const { return listener_->port(); }
  std::string address() const { return listener_->boundAddress(); }

 private:
  struct Session {
    uint64_t serial = 0;
    std::shared_ptr<net::Connection> conn;
    wire::Dispatcher dispatcher;
    bool joined = false;
    bool awaiting_resume = false;  // taken back while recovering: RunResumed when the run goes on
    bool reconnects = false;       // JoinRequest::kReconnects: it comes back when its connection breaks
    net::HostPort p2p;             // its ring listener (the liveness check of a held member)
    wire::Uuid id{};
    TimePoint connected_at = Clock::now();
    TimePoint last_tx = Clock::now();
  };

  void onAuthenticated(net::Authenticated auth);
  void registerHandlers(Session& s);
  Status onJoin(Session& s, const wire::JoinRequest& m);
  // A member of the run coming back (run_recovery.hpp): taken back under its id.
  Status resumePeer(Session& s, const wire::JoinRequest& m);
  // Answers a JoinRequest with Error(why) and closes the connection.
  Status refuseJoin(Session& s, const Status& why);
  wire::MemberInfo memberInfo(const Session& s, const wire::JoinRequest& m) const;
  void sendAccepted(Session& s, const wire::Uuid& id, bool resumed);
  void sendResumed(Session& s);
  void finishRecovery();
  // Drops every member (each gets Error(why)) and the run's books: a newer master leads the run.
  void resetRun(const Session* keep, const Status& why);
  void freshBooks();
  Status persistRecord();
  // etcd (etcd_leadership.hpp): elected, lost the leadership, who leads.
  void onElected(const EtcdRecord& record);
  void onDeposed(const Status& why);
  void publishRecord();
  void onClosed(uint64_t serial, const Status& reason);
  void forget(const Session* s, const Status& reason);  // removes a closed session's peer (or holds it)
  // master_hold.cpp: a member whose connection broke (not a timeout, not a protocol error) and that
  // said it comes back keeps its place for the silence limit, unless its ring port refuses connections
  // (the process is gone). False: not held (remove it).
  bool holdPeer(const Session& s, const Status& reason);
  void checkHeldAlive(const wire::Uuid& id, uint64_t gen, const net::HostPort& at, uint32_t attempts_left = 4);
  void backFromHold(const wire::Uuid& id);  // it came back on a new connection
  // Whether a new member's ring port accepts connections from here (master_reach.cpp): dialled once,
  // as its ring neighbours would; the member joins the membership with the verdict in
  // MemberInfo::inbound. `seen`: where its control connection came from (logged).
  void checkReachable(wire::MemberInfo info, const std::string& seen);
  // Whether others can dial member `id` (its dial-back, else its place in the ring).
  bool dialable(const wire::Uuid& id) const;
  void expireHolds(TimePoint now);          // from tick(): those past their deadline are removed
  void releaseLater(std::unique_ptr<Session> s);
  void apply(const Effects& fx);
  void tick();
  void tickLater();  // the next tick() in tick_period_
  void publishStats();
  void removePeer(const wire::Uuid& id, wire::LeaveReason why, const std::string& detail);
  Session* sessionById(const wire::Uuid& id);
  uint32_t groupOf(const wire::Uuid& id) const;  // its group in the current ring (0 if not in it)
  // For a collective (all-reduce or sync) announced by `id`: the accepted ring members of its group
  // (empty when it is not in the ring), and why no collective can run now (OK when one can).
  std::vector<wire::Uuid> groupMembers(const wire::Uuid& id) const;
  Status collectivesBlocked() const;

  asio::io_context& io_;
  MasterConfig config_;
  std::shared_ptr<const net::AuthKey> key_;
  std::shared_ptr<net::Listener> listener_;
  asio::steady_timer ticker_;
  Millis tick_period_;
  Membership membership_;
  OpCoordinator ops_;
  OpResolver resolver_;
  SyncCoordinator syncs_;
  std::unique_ptr<RunRecovery> recovery_;  // made by open()
  std::unique_ptr<EtcdLeadership> etcd_;   // MasterConfig::etcd_url
  uint64_t published_ = 0;                 // recovery_->changes() last handed to etcd_
  uint64_t persisted_ = 0;                 // recovery_->changes() last written to the state file
  std::pair<size_t, uint64_t> keys_shape_{~size_t{0}, 0};  // (members, epoch) when the record's keys were last set
  uint64_t takeovers_ = 0;
  uint64_t step_downs_ = 0;
  std::map<uint64_t, std::unique_ptr<Session>> sessions_;  // by serial
  std::map<wire::Uuid, uint64_t> serial_by_id_;
  struct Held {
    TimePoint since{}, until{};
    std::string why;   // how its connection ended
    uint64_t gen = 0;  // which hold (a liveness answer for an older one is ignored)
  };
  std::map<wire::Uuid, Held> held_;
  std::map<wire::Uuid, bool> reachable_;  // members whose dial-back ended: true when it authenticated
  uint64_t hold_gen_ = 0;
  uint64_t next_serial_ = 1;
  bool stopping_ = false;
  StatsSink on_stats_;
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_MASTER_SERVER_HPP_
