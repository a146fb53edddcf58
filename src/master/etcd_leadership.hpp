// Leadership among several masters of one run through etcd (MasterConfig::etcd_url), the way
// torchelastic's etcd rendezvous does it: no protocol of our own between masters.
//
//   <prefix>/leader   this master's address, put only if absent, attached to a lease of etcd_lease_ms:
//                     whoever holds it leads; it vanishes with the lease when its holder stops or freezes
//   <prefix>/record   the run's record {run_id, term, epoch, leader, members}: a new leader reads it and
//                     writes term + 1 with a compare on its revision, and every later write compares
//                     on the revision it wrote last, so two masters can never both believe they lead
//                     the same term. A compare that fails on this master's own record (its name and
//                     term: the answer to an earlier write was lost) adopts that record's revision.
//
// A leader keeps its lease alive every quarter of it and acts only until its local deadline: the
// sending time of the last keepalive etcd answered, plus the lease's TTL, minus a margin of a quarter
// TTL. etcd cannot expire the lease before that keepalive's arrival plus the TTL, so a leader cut off
// from etcd stops before any other master can be elected. A timer on the io_context enforces the
// deadline (on_lost), however long the blocking call in flight takes. It also steps down when etcd says
// the lease is gone or when a record write finds another master's record. The followers try for the
// leader key every third of a lease. Blocking HTTP runs on this class's own thread; the callbacks,
// the timer and overdue() run on the master's io_context.
#ifndef PCCL_MASTER_ETCD_LEADERSHIP_HPP_
#define PCCL_MASTER_ETCD_LEADERSHIP_HPP_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "master/etcd_client.hpp"
#include "master/run_recovery.hpp"
#include "net/asio.hpp"

namespace pccl::master {

struct EtcdConfig {
  std::string url;              // http://HOST:PORT of an etcd member (its v3 JSON gateway)
  std::string prefix;           // keys live under it: one prefix per run
  std::string name;             // this master's address as peers reach it (the leader key's value)
  Millis lease{5000};           // the leader's lease (etcd rounds up to whole seconds, at least 2)
};

// The record as stored (JSON). `members`: the ring's member ids, for operators and a successor's logs.
struct EtcdRecord {
  RunRecord run;
  std::string leader;
  std::vector<wire::Uuid> members;
};
std::string encodeEtcdRecord(const EtcdRecord& r);
Result<EtcdRecord> decodeEtcdRecord(const std::string& text);

class EtcdLeadership {
 public:
  struct Callbacks {
    // Elected: `record` is the run's record with this master's new term (run id zero when no run was
    // ever recorded under the prefix; `leader`: the master that led before). Runs on the io_context.
    std::function<void(const EtcdRecord& record)> on_elected;
    // No longer the leader (after on_elected; never after stop()). Runs on the io_context, at the local
    // deadline at the latest.
    std::function<void(const Status& why)> on_lost;
    // Who leads now, as followers see it (empty: nobody); runs on the io_context when it changes.
    std::function<void(const std::string& leader)> on_leader;
  };

  EtcdLeadership(asio::io_context& io, EtcdConfig config, Callbacks callbacks);
  ~EtcdLeadership();
  EtcdLeadership(const EtcdLeadership&) = delete;
  EtcdLeadership& operator=(const EtcdLeadership&) = delete;

  Status start();  // checks the URL; starts the thread
  // Resigns (revokes the lease, so that a follower takes over at once) and joins the thread.
  void stop();
  // Any thread, while leading: write this record (the newest one wins; written in the background).
  void publish(const EtcdRecord& record);
  // io thread: true while this master still acts as the leader (on_elected delivered, on_lost not yet)
  // although its tenure is over (the local deadline passed, or the thread found the lease lost). The
  // step-down (on_lost) is then on its way; the master must not act meanwhile.
  bool overdue();

  // The margin before etcd's expiry of a lease of `ttl` at which the leader stops acting (a quarter).
  static Millis deadlineMargin(Millis ttl) { return ttl / 4; }

 private:
  void run();
  // true: elected, with the lease granted at `granted` (a request sent then).
  bool campaign(TimePoint* granted);
  void lead(TimePoint granted);  // until the lease is lost, the local deadline passes, or stop()
  // Writes the record (compare on record_rev_): OK when written, or when etcd did not answer (*again:
  // try it with the next keepalive); an error when another master wrote it (this one no longer leads).
  Status writeRecord(const EtcdRecord& record, bool* again);
  // Whether `kv` holds this master's own record of its current term.
  bool isOwnRecord(const EtcdClient::KeyValue& kv) const;
  // Waits `d` or until stop(), a record to publish or (while_leading) the tenure's end; false on stop().
  bool sleepFor(Millis d, bool while_leading = false);
  void post(std::function<void()> fn);

  // The tenure: begun by the thread when elected, ended by whichever comes first, the thread (lease
  // gone, record lost) or the io thread's timer (local deadline). Thread-safe (mu_).
  uint64_t beginTenure(TimePoint deadline);
  void extendTenure(TimePoint deadline);
  bool tenureValid();                 // begun, not ended, and before its deadline
  void endTenure(const Status& why);  // posts on_lost when the tenure was still on
  // io thread: delivers on_elected / on_lost for tenure `t` (once each; on_lost only after
  // on_elected), and the deadline timer.
  void deliverElected(uint64_t t, const EtcdRecord& record);
  void deliverLost(uint64_t t, const Status& why);
  void armTimer();
  void onTimer();

  asio::io_context& io_;
  EtcdConfig config_;
  Callbacks callbacks_;
  std::unique_ptr<EtcdClient> client_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::optional<EtcdRecord> to_publish_;  // requires mu_
  uint64_t tenure_ = 0;                   // requires mu_: counts elections
  bool leading_ = false;                  // requires mu_: tenure_ is on
  TimePoint deadline_;                    // requires mu_: tenure_'s local deadline
  Millis ttl_{0};                         // the lease's TTL as requested (const after the constructor)
  std::string seen_leader_;               // thread
  int64_t lease_ = 0;                     // thread
  uint64_t term_ = 0;                     // thread: the term this master was elected for
  int64_t record_rev_ = 0;                // thread: the record's revision we wrote last
  uint64_t acting_ = 0;                   // io thread: the tenure on_elected was delivered for (0: none)
  asio::steady_timer timer_;              // io thread: fires at the local deadline
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_ETCD_LEADERSHIP_HPP_
