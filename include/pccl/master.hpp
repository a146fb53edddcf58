// pccl::Master: the control-plane server of a run. Admits peers, orders the ring, watches heartbeats.
// It never carries tensor data. `pccl-master` and pcclMasterCreate() are thin wrappers around it.
#ifndef PCCL_MASTER_HPP_
#define PCCL_MASTER_HPP_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "pccl/export.h"
#include "pccl/status.hpp"

namespace pccl {

struct MasterConfig {
  std::string listen_address = "0.0.0.0:0";  // HOST:PORT; port 0 picks a free port
  std::string secret;                        // shared secret; empty = open run (logged once); create wipes its copy
  uint32_t heartbeat_interval_ms = 1000;     // how often the master pings each peer
  uint32_t peer_timeout_ms = 10000;          // silence after which a peer is declared dead
  uint32_t handshake_timeout_ms = 5000;      // an unauthenticated connection is dropped after this
  uint32_t max_peers = 1024;                 // a JoinRequest beyond this gets Error(InvalidUsage)
  uint32_t max_pending_handshakes = 64;      // connections still handshaking at once
  uint32_t max_concurrent_ops = 4096;        // collectives announced or running at once, whole run
  // Tags that diverge fail after this long (Mismatch naming who is missing): a member that has not
  // called tag T while it waits in a tag that a caller of T has not called (docs/algorithms.md §9).
  // Slow members that are still computing are never failed by it. 0 = off (op_timeout_ms only).
  uint32_t announce_window_ms = 30000;
  bool encrypt = false;                      // encrypt every connection (needs a secret; peers must match)
  // Link measurement (pcclOptimizeTopology, docs/concepts.md): a sender measures each link for at most
  // probe_budget_ms once its connections are up, or until it sent probe_bytes.
  uint32_t probe_budget_ms = 2000;
  uint64_t probe_bytes = 256ull << 20;
  // Automatic mode: every topology update measures the links the master lacks (a joiner's, to and
  // from every member of its group) and installs the best ring over the measured links.
  // -1: the environment variable PCCL_AUTO_OPTIMIZE (0 or 1), else off; 0: off; 1: on.
  int auto_optimize = -1;
  // Surviving the master (docs/concepts.md "When the master dies"). A standby leads no run: it takes one
  // over from the first peer that comes back to it after losing its master, and refuses newcomers until
  // then (so that a newcomer given several master addresses finds the one that leads).
  bool standby = false;
  // A master taking a run back waits this long for every member of the last ring to come back before the
  // run goes on with whoever did (at once when all are back).
  uint32_t rebuild_window_ms = 10000;
  // Optional file where the master keeps {run id, term} (written atomically when they change). A master
  // restarted with it waits rebuild_window_ms for that run's members before a newcomer may start the run
  // over, and never reuses a term. Empty: nothing is written (a restarted master learns the run from
  // its peers alone).
  std::string state_file;
  // Several masters of one run elect their leader through etcd (docs/failover.md): etcd_url is an etcd
  // member's client URL (http://HOST:PORT, its v3 JSON gateway). Masters with the same etcd_prefix
  // belong to one run; the one holding the leader key (a lease of etcd_lease_ms) leads, the others
  // refuse every peer until they are elected. advertise_address: HOST:PORT peers reach this master at
  // (stored as the leader's name; empty: the bound listen address). Not with standby or state_file.
  std::string etcd_url;
  std::string etcd_prefix = "/pccl/run";
  uint32_t etcd_lease_ms = 5000;
  std::string advertise_address;
};

// A snapshot of the run, for monitoring and tests.
struct MasterStats {
  uint64_t epoch = 0;        // epoch of the newest ring (being built or built)
  uint32_t accepted = 0;     // peers in the ring
  uint32_t pending = 0;      // peers waiting to be admitted
  bool building = false;     // a ring is being built right now
  uint64_t connections = 0;  // authenticated control connections open
  // All-reduces in the master's books: announced by a member (still running there 5 ms after the
  // call, docs/protocol.md §5.3), not yet committed or aborted. Calls that commit sooner never count.
  uint64_t collectives = 0;
  bool measuring = false;          // a link survey runs right now (pcclOptimizeTopology)
  uint64_t topology_surveys = 0;   // link surveys completed
  uint64_t links_measured = 0;     // links measured, over every survey
  uint64_t links_known = 0;        // links the master holds now (both ends still members)
  // The newest ring's slowest link as measured, and the join-order ring's over the same links,
  // bytes/s; 0 when a link either ring uses was not measured.
  double predicted_bottleneck = 0;
  double join_order_bottleneck = 0;
  // Leadership: 0 leads a run, 1 standby (MasterConfig::standby), 2 taking a run back from its peers,
  // 3 follower (etcd: another master leads).
  int role = 0;
  uint64_t term = 0;                   // the run's term under this master (0: no run yet)
  std::array<uint8_t, 16> run_id{};    // the run it leads (zero: none)
  uint64_t takeovers = 0;              // runs taken back from returning peers
  uint64_t step_downs = 0;             // times it lost a run to a newer master, or all of its members
  // Members whose ring port the master could not dial when they joined (a firewall, a NAT, a wrong
  // advertised address): other peers cannot dial them either (docs/concepts.md, "Reachability").
  uint32_t unreachable = 0;
};

// Thread-safety: all methods may be called from any thread; the state lives on one internal event loop.
class PCCL_API Master {
 public:
  static Result<std::unique_ptr<Master>> create(MasterConfig config);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  Status start();              // binds and starts serving in a background thread; non-blocking
  uint16_t port() const;       // the bound port (valid after start)
  std::string address() const; // "HOST:PORT" actually bound (valid after start)
  Status stop();               // closes every connection and joins the thread; idempotent
  MasterStats stats() const;
  // Blocks until `pred(stats())` holds (re-checked on every membership event) or `timeout_ms` passes.
  // Returns whether it held.
  bool waitFor(const std::function<bool(const MasterStats&)>& pred, uint32_t timeout_ms) const;

 private:
  class Impl;
  explicit Master(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pccl

#endif  // PCCL_MASTER_HPP_
