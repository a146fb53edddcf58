// A peer's session with the run's masters (docs/architecture.md §4 "Without a master", docs/protocol.md
// §8.8): which master it tries, its join, and, once it belongs to a run, coming back to a master after
// losing one.
//
//   start()       dial masters[at] ── opened ──► JoinRequest: a newcomer's (kNewcomer), one asking a
//                 standby to start the run (kAnyMaster), or a member's resume (kResume)
//   a failure     (unreachable, refused, another run's master): the next master at once; after a full
//                 round, a pause (50 ms doubling to 1 s) and another round, until master_reconnect_ms
//                 is spent: fatal. A newcomer every master refused as a standby tries one more round at
//                 once, asking any master to start the run. A code no master can cure: fatal at once.
//   JoinAccepted  a newcomer's: joined() (the run's id and term are ours; a master of another run, or
//                 of an older term, is refused from then on). A member's: it was taken back; the run
//                 goes on at RunResumed: back().
//   link lost     after a master took us: away(), and the same master is dialled first (a broken
//                 connection, or a restart in place); with master_reconnect_ms 0, or a code no master
//                 can cure: fatal()
//
//   kIdle ──start()──► kJoining ──JoinAccepted──► kJoined ──lost──► kAway ──RunResumed──► kJoined
//     ▲                   │                          │                 │
//     └── fatal, stop() ──┴──────────────────────────┴─────────────────┘
//
// Pure logic: no sockets, no timers; what it does goes through an Io (api/: the MasterLink and a timer
// of the io thread; tests: a recorder), what it learns to a Listener. Thread: the communicator's io thread.
#ifndef PCCL_PEER_MASTER_SESSION_HPP_
#define PCCL_PEER_MASTER_SESSION_HPP_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "net/endpoint.hpp"
#include "util/clock.hpp"
#include "wire/dispatch.hpp"
#include "wire/messages.hpp"

namespace pccl::peer {

class MasterSession {
 public:
  enum class State { kIdle, kJoining, kJoined, kAway };
  enum class Join { kNewcomer, kAnyMaster, kResume };

  struct Config {
    std::vector<net::HostPort> masters;  // the run's masters, tried in this order (at least one)
    int64_t master_reconnect_ms = 0;     // 0: losing the master, or failing to reach one, is final
    uint32_t heartbeat_interval_ms = 1000;
    uint32_t peer_timeout_ms = 10000;
    std::function<TimePoint()> now = [] { return Clock::now(); };
  };

  // What the session does to the world.
  class Io {
   public:
    virtual ~Io() = default;
    // Opens the control connection to `master`; the session hears opened() and, once open, lost().
    virtual void dial(const net::HostPort& master) = 0;
    // Sends a JoinRequest of `kind`; a resume names the run and term it follows.
    virtual void sendJoin(Join kind, const wire::Uuid& run_id, uint64_t term) = 0;
    virtual void startHeartbeats(Millis interval, Millis timeout) = 0;
    virtual void setReady(bool ready) = 0;  // reports may go to the master
    virtual void close() = 0;               // closes the control connection (no lost() follows)
    virtual void retryAfter(Millis pause) = 0;  // retry() once the pause is over
    // Runs `fn` once the current handler returned (the connection may not be closed from within it).
    virtual void later(std::function<void()> fn) = 0;
    virtual std::string masterName() const = 0;  // the master of the current connection, for messages
  };

  // What the session tells its owner.
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void joined(const wire::JoinAccepted& m) = 0;  // a newcomer was taken into the run
    virtual void away(const Status& why) = 0;  // the master was lost (again); the session looks for one
    virtual void back(const wire::RunResumed& m, int64_t away_ms) = 0;  // a master took the run back
    virtual void fatal(const Status& why) = 0;  // no master will take this peer: the session is over
  };

  MasterSession(Config config, Io& io, Listener& listener);

  // Its messages: JoinAccepted and RunResumed.
  void registerHandlers(wire::Dispatcher& d);

  void start();  // a round of attempts from the current master on (connect())
  void stop();   // the peer left, failed or gave up connecting: nothing more is tried
  void opened(const Status& s, bool refused);  // the connection dial() asked for is open (or not)
  // The open connection broke, or the master closed it; `refused`: with an Error of its own.
  void lost(const Status& s, bool refused);
  void retry();  // retryAfter()'s pause is over
  Status onJoinAccepted(const wire::JoinAccepted& m);
  Status onRunResumed(const wire::RunResumed& m);

  State state() const { return state_; }
  bool member() const { return state_ == State::kJoined || state_ == State::kAway; }
  uint64_t term() const { return term_; }

 private:
  void open();
  void sendJoin();
  void attemptFailed(const Status& s, bool refused);
  void fail(const Status& s);
  void restartRound();

  Config config_;
  Io& io_;
  Listener& listener_;
  State state_ = State::kIdle;
  // The run we belong to (from a newcomer's JoinAccepted): a master of another run, or of an older
  // term, is refused.
  bool has_run_ = false;
  wire::Uuid run_id_{};
  uint64_t term_ = 0;
  wire::Uuid peer_id_{};
  TimePoint away_since_{};
  // The current round of attempts.
  size_t at_ = 0;
  TimePoint attempts_since_{};
  size_t tried_ = 0, refused_ = 0;  // in this cycle over the masters
  uint32_t cycles_ = 0;
  bool any_master_ = false;   // every master refused us as a standby: ask one to start the run
  bool resume_sent_ = false;  // the current connection's JoinRequest was a resume
  bool joined_link_ = false;  // the current connection answered JoinAccepted
};

}  // namespace pccl::peer

#endif  // PCCL_PEER_MASTER_SESSION_HPP_
