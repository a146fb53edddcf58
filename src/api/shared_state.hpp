// Communicator::syncSharedState (design.md §6, docs/shared_state.md): the calling thread hashes the
// buffers, announces them to the master and waits; the io thread receives the plan, serves this
// peer's buffers to fetchers and fetches what the plan lists; the calling thread then verifies what
// arrived and reports. Every wait has the sync's deadline; the call returns only once nothing reads
// or writes the user's buffers any more.
#ifndef PCCL_API_SHARED_STATE_HPP_
#define PCCL_API_SHARED_STATE_HPP_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net/asio.hpp"
#include "codec/hash.hpp"
#include "net/auth.hpp"
#include "pccl/communicator.hpp"
#include "peer/state_transfer.hpp"
#include "util/clock.hpp"
#include "wire/dispatch.hpp"
#include "wire/sync_messages.hpp"

namespace pccl {

// What a sync needs from its communicator at the time of the call.
struct SyncContext {
  uint64_t epoch = 0;
  PeerId self{};
  std::vector<RingMember> ring;        // sources' addresses
  uint32_t connections = 4;            // per source on another host
  uint32_t same_host_connections = 1;  // per source on this host
  Millis timeout{1800000};             // the whole call
  Millis handshake_timeout{5000};
  Millis redial_window{10000};         // a broken state connection is dialled again this long (peer timeout)
};

// Checks a state before anything is sent: names, dtypes, pointers, sizes, zstd level.
Status checkSharedState(const SharedState& state, SyncStrategy strategy);

class SharedStateSync {
 public:
  struct Hooks {  // both run on the io thread and send to the master
    std::function<void(const wire::SyncAnnounce&)> announce;
    std::function<void(const wire::SyncDone&)> report;
  };

  SharedStateSync(asio::io_context& io, std::shared_ptr<const net::AuthKey> key, Hooks hooks);

  // The calling thread; blocks until the sync is over or its deadline. One at a time.
  Result<SyncInfo> run(SharedState& state, SyncStrategy strategy, const SyncContext& ctx);

  // ---- io thread ----
  void registerHandlers(wire::Dispatcher& d);  // the master's SyncPlan and SyncComplete
  void onPlan(const wire::SyncPlan& m);
  void onComplete(const wire::SyncComplete& m);
  void adopt(net::Link link, uint64_t epoch);  // an authenticated kStateFetch connection
  void shutdown(const Status& why);                     // stops serving and fetching
  // Any thread: the master link is gone; a waiting run() returns `why`.
  void linkLost(const Status& why);
  // Any thread: the master was lost and the peer reconnects: a run() under way returns `why` (later
  // runs are not affected).
  void interrupt(const Status& why);
  // Io thread: the master that held our place while our control connection was broken took us back (the
  // sync goes on): what it may not have got is sent again, our announcement while no plan came. The
  // master repeats our plan (then onPlan sends our SyncDone again) or its SyncComplete.
  void masterBack();

 private:
  struct Key {
    std::string name;
    uint8_t* data = nullptr;
    size_t bytes = 0;
    wire::Digest32 digest{};
  };
  Result<wire::SyncAnnounce> prepare(SharedState& state, SyncStrategy strategy, const SyncContext& ctx);
  // Waits under `lk` until `ready`, the link's loss, or `deadline`; OK only for `ready`.
  Status waitFor(std::unique_lock<std::mutex>& lk, TimePoint deadline, const std::function<bool()>& ready);
  // Leaf digests of the fetched tensors (fetch order), filled as their chunks arrive.
  struct Leaves {
    std::vector<codec::Digest> digest;
    std::vector<bool> done;
  };
  static codec::Digest leafOf(const Key& k, size_t leaf);  // leaf `leaf` of k's bytes
  // Hashes the leaves of what arrived since the last call (off the lock); false when nothing had.
  bool hashArrived(std::unique_lock<std::mutex>& lk, std::vector<Leaves>& leaves);
  Status verify(const std::vector<wire::SyncFetch>& fetches, std::vector<Leaves>& leaves) const;
  // Io thread: builds the fetch plan of `plan`, or why it cannot be followed.
  Result<peer::FetchPlan> fetchPlan(const wire::SyncPlan& plan);
  // Posts to the io thread: stop serving and fetching, optionally report, and wait for it.
  uint64_t endOnIo(const wire::SyncDone* report);
  void report(const wire::SyncDone& d);  // io thread: hooks_.report, remembered for a repeated plan

  asio::io_context& io_;
  std::shared_ptr<const net::AuthKey> auth_;
  Hooks hooks_;
  peer::StateServer server_;                       // io thread
  std::shared_ptr<peer::StateFetcher> fetcher_;    // io thread
  uint64_t tx_at_plan_ = 0;                        // io thread: server_.bytesSent() when serving began

  std::mutex mu_;
  std::condition_variable cv_;
  bool active_ = false;     // a run() is under way
  bool planned_ = false;    // its SyncPlan arrived
  bool fetched_ = false;    // its fetches ended (or there were none)
  bool completed_ = false;  // its SyncComplete arrived (serving has stopped)
  uint64_t run_id_ = 0;
  std::vector<Key> keys_;
  SyncContext ctx_;
  int compress_ = 0;
  wire::SyncPlan plan_;
  wire::SyncAnnounce announce_;               // the run's announcement (masterBack())
  std::optional<wire::SyncDone> reported_;    // io thread: the run's SyncDone, once sent
  Status fetch_status_;
  uint64_t rx_bytes_ = 0;
  struct Piece {
    size_t fetch = 0, offset = 0, length = 0;
  };
  std::vector<Piece> arrived_;  // fetched chunks not hashed yet
  Status complete_status_;
  Status lost_;
  Status interrupted_;  // interrupt(): fails the run under way
};

}  // namespace pccl

#endif  // PCCL_API_SHARED_STATE_HPP_
