// Leadership among several masters of one run through etcd (MasterConfig::etcd_url), the way
// torchelastic's etcd rendezvous does it: no protocol of our own between masters.
//
//   <prefix>/leader   this master's address, put only if absent, attached to a lease of etcd_lease_ms:
//                     whoever holds it leads; it vanishes with the lease when its holder stops or freezes
//   <prefix>/record   the run's record {run_id, term, epoch, leader, members}: a new leader reads it and
//                     writes term + 1 with a compare on its revision, and every later write compares
//                     on the revision it wrote last, so two masters can never both believe they lead
//                     the same term
//
// A leader keeps its lease alive every third of it; it steps down (on_lost) when the lease is gone, when
// etcd does not answer for a whole lease, or when a record write finds someone else's revision. The
// followers try for the leader key every third of a lease. Blocking HTTP runs on this class's own
// thread; the callbacks are posted to the master's io_context.
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
    // No longer the leader (or never will be again: stop()). Runs on the io_context.
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

 private:
  void run();
  bool campaign();   // true: elected
  void lead();       // until the lease is lost or stop()
  bool sleepFor(Millis d);  // false when stop() was called
  void post(std::function<void()> fn);

  asio::io_context& io_;
  EtcdConfig config_;
  Callbacks callbacks_;
  std::unique_ptr<EtcdClient> client_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::optional<EtcdRecord> to_publish_;  // requires mu_
  std::string seen_leader_;               // thread
  int64_t lease_ = 0;                     // thread
  int64_t record_rev_ = 0;                // thread: the record's revision we wrote last
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_ETCD_LEADERSHIP_HPP_
