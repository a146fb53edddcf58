// pccl::Communicator: one peer's membership in a run, and its collectives.
#ifndef PCCL_COMMUNICATOR_HPP_
#define PCCL_COMMUNICATOR_HPP_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pccl/export.h"
#include "pccl/status.hpp"
#include "pccl/types.hpp"

namespace pccl {

namespace detail {
struct CommAccess;  // internal (src/api/comm_impl.hpp): the tests' way to a communicator's internals
}  // namespace detail

struct CommConfig {
  // "HOST:PORT" of the master (required), or a comma-separated list of the run's masters (a standby's
  // address after the primary's, docs/concepts.md "When the master dies"): tried in turn.
  std::string master_address;
  std::string listen_address = "0.0.0.0:0";  // where ring neighbours connect to us; port 0 = any
  std::string advertise_host;                // host others dial; empty = the address the master sees
  uint32_t peer_group = 0;                   // collectives run within a group; votes are global
  // K: TCP connections to the ring successor, 1..1024; 0 (the default): the link starts from its
  // round trip and chooses how many carry data from what it measures, out of a pool of
  // max_connections_per_peer (docs/algorithms.md §13).
  uint32_t connections_per_peer = 0;
  uint32_t same_host_connections = 1;        // K when the successor is on this host; 0: connections_per_peer
  uint32_t heartbeat_interval_ms = 1000;     // how often we ping the master
  uint32_t peer_timeout_ms = 10000;          // master silence after which it is unreachable
  uint32_t connect_timeout_ms = 120000;      // deadline of connect() / updateTopology()
  uint32_t handshake_timeout_ms = 5000;      // deadline of one connection's authentication
  std::string secret;                        // empty: PCCL_SECRET / PCCL_SECRET_FILE, else none (create wipes its copy)
  bool encrypt = false;                      // encrypt every connection (needs a secret); false: PCCL_ENCRYPT
  uint32_t op_timeout_ms = 1800000;          // deadline of one collective, from the call to its result
  uint32_t segment_bytes = 1 << 20;          // largest pipelining unit on the ring (all peers must agree)
  uint32_t max_concurrent_ops = 1024;        // all-reduces in flight on this peer at once (1..65536)
  // Small all-reduces gather (every input to every peer, docs/algorithms.md §1) when (group size - 1) x
  // the input's wire bytes is at most this: 0..4194304, 0 = never; -1: PCCL_GATHER_BYTES, else 1 MiB
  // when the group's ring spans hosts and 256 KiB when all of it is on one host. All peers must agree
  // (else Mismatch naming algo=).
  int64_t gather_bytes = -1;
  // Ring neighbours on this host read each other's large payloads straight from the sender's memory
  // (process_vm_readv, one copy instead of the socket's two; docs/algorithms.md §1): 1 on, 0 off (every
  // frame through the socket), -1: PCCL_SAME_HOST_READS, else on. Peers need not agree: a link lends
  // only when its receiver accepts, and either way the result is the same bits.
  int same_host_reads = -1;
  // Whether other peers can open connections to this peer's ring port (docs/concepts.md
  // "Reachability"): 1 yes, 0 no (behind a firewall or a NAT that drops what comes in: its links are
  // then opened from here, and the master does not try to dial it), -1: PCCL_INBOUND, else 1. With 1
  // the master still dials the port back once on join and treats the peer as 0 when that fails.
  int inbound = -1;
  // How long a peer that lost its master keeps trying to reach one (every address of master_address,
  // in turn) before its calls fail with MasterUnreachable; meanwhile collectives go on on the ring.
  // 0..86400000 ms, 0 = never (the master's loss ends the communicator); -1: PCCL_RECONNECT_MS, else
  // 30000. connect() tries for as long before it reports an unreachable master.
  int64_t master_reconnect_ms = -1;
  // The region this peer is in (a data centre, a cloud region: peers behind fast, close links to each
  // other), up to 64 bytes of [A-Za-z0-9._-]; names starting with "auto-" are the master's. Empty:
  // PCCL_REGION, else none declared: the master places the peer from the links it measured
  // (optimizeTopology()), else in the unnamed region "". docs/algorithms.md "Regions".
  std::string region;
  // How the group's all-reduces run when its peers sit in several regions (docs/algorithms.md §12):
  // "flat" (one ring over the whole group), "hierarchical" (inside each region, then across regions,
  // then inside again), "auto" (the master's cost model over the measured links). Empty: PCCL_ALGORITHM,
  // else "auto". The master decides for the whole group: flat when any member asks for flat or when the
  // regions leave nothing to gain (one region, or one peer per region), else hierarchical when one asks.
  std::string algorithm;
  // With connections_per_peer 0: the connections each link opens, of which it uses as many as pay
  // (1..1024); 0: PCCL_MAX_CONNECTIONS, else 32.
  uint32_t max_connections_per_peer = 0;
};

using PeerId = std::array<uint8_t, 16>;

struct RingMember {
  PeerId id{};
  std::string host;
  uint16_t port = 0;
  uint32_t group = 0;
  // Its region in this ring, the same on every peer: the one it declared, else the one the master
  // detected from the measured links ("auto-0", "auto-1", ...), else "" (the unnamed region).
  std::string region;
  // Whether other peers can dial it: false when it declared CommConfig::inbound = 0 or the master's
  // dial-back of its ring port failed (docs/concepts.md "Reachability"); its links are opened from it.
  bool inbound = true;
};

// What the last completed topology update installed.
struct Topology {
  uint64_t epoch = 0;
  uint32_t world_size = 0;        // accepted peers, all groups
  uint32_t rank = 0;              // our index in `ring`
  uint32_t group_world_size = 0;  // accepted peers in our group
  uint32_t group_rank = 0;        // our index among them
  uint32_t successor_connections = 0;    // ring connections we send on (0 when alone in our group)
  uint32_t predecessor_connections = 0;  // ring connections we receive on
  std::vector<RingMember> ring;   // global ring order; a group's ring is its members in this order
  // Our group's large all-reduces run in two levels (CommConfig::algorithm; docs/algorithms.md §12).
  bool hierarchical = false;
};

// A link the master measured (optimizeTopology(), links()): from one ring member to another.
struct LinkInfo {
  uint32_t from_rank = 0;  // indices into Topology::ring of the topology links() was answered in
  uint32_t to_rank = 0;
  PeerId from{};
  PeerId to{};
  double bandwidth = 0;    // bytes/s the receiver measured; 0: the link did not work
  double rtt_s = 0;        // round trip of small messages, seconds
};

// An all-reduce started with allReduceAsync(). Copyable; every copy refers to the same operation.
// Thread-safe. The buffers passed to allReduceAsync() belong to pccl until the operation is done.
class PCCL_API ReduceHandle {
 public:
  struct State;
  ReduceHandle() = default;
  explicit ReduceHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}
  // Blocks until the operation is done (it always ends: its deadline is op_timeout_ms, and destroying
  // the communicator fails it). May be called after the communicator is gone.
  Result<ReduceInfo> wait() const;
  // Blocks until the operation is done or `timeout` passes; true once done (wait() then returns at
  // once). Giving up does not abort the operation: its buffers still belong to pccl.
  bool waitFor(std::chrono::milliseconds timeout) const;
  bool test() const;  // true once done; wait() then returns at once
  bool valid() const { return state_ != nullptr; }

 private:
  std::shared_ptr<State> state_;
};

// Thread-safety: methods may be called from any thread, but connect(), updateTopology() and leave()
// must not overlap each other or any collective. Collectives may overlap each other when their tags
// differ. See docs/concurrency.md.
class PCCL_API Communicator {
 public:
  static Result<std::unique_ptr<Communicator>> create(CommConfig config);
  ~Communicator();  // leaves gracefully if still a member; every all-reduce not yet done fails (InvalidUsage)
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  Status connect();         // join; blocks until admitted and the ring is built, or the deadline
  Status updateTopology();  // collective vote: admit pending peers, drop lost ones, rebuild the ring
  Result<bool> arePeersPending();  // true when updateTopology() would change the membership
  // Collective like updateTopology(), and more: the peers measure their links (as the master plans),
  // the master orders the ring by them (best bottleneck, then least latency) and installs it under a
  // new epoch, all or nothing. Every accepted peer must call it (a peer calling updateTopology() at
  // the same time fails everyone with Mismatch). docs/concepts.md, "Topology optimisation".
  Status optimizeTopology();
  // The links the master holds between members of our current ring (one round trip to the master).
  Result<std::vector<LinkInfo>> links();
  // Reduces `count` elements of `send` across the group's peers into `recv` (send == recv: in place;
  // otherwise the two must not overlap). Every peer of the group calls it with the same tag, count,
  // dtype, op, quant and compress (and the same CommConfig::segment_bytes); else Mismatch everywhere. On failure `send` is untouched and, in place, `recv` holds its input.
  Result<ReduceInfo> allReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                               const ReduceOptions& options = {});
  Result<ReduceHandle> allReduceAsync(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                                      const ReduceOptions& options = {});
  // The other collectives run on the same ring with the same properties (striped, pipelined, agreed,
  // all or nothing, concurrent by tag, the same options; docs/algorithms.md §1a). Ranks and blocks
  // are those of the group's ring: Topology::group_rank, which changes when the ring is rebuilt. On
  // failure `send` is untouched and an in-place buffer holds its input again; other outputs are
  // unspecified. Device buffers (ReduceOptions::location) work as for the all-reduce (docs/gpu.md).
  //
  // Copies `count` elements of the root's `send` into every peer's `recv` (send == recv: in place; a
  // non-root's `send` is not read and may be null), pipelined along the ring from the root.
  Result<ReduceInfo> broadcast(const void* send, void* recv, size_t count, DataType dtype, uint32_t root,
                               const ReduceOptions& options = {});
  Result<ReduceHandle> broadcastAsync(const void* send, void* recv, size_t count, DataType dtype, uint32_t root,
                                      const ReduceOptions& options = {});
  // Every peer's `send_count` elements, in rank order, into every peer's `recv` (group size x
  // send_count elements). In place: send == recv + group_rank x send_count elements.
  Result<ReduceInfo> allGather(const void* send, void* recv, size_t send_count, DataType dtype,
                               const ReduceOptions& options = {});
  Result<ReduceHandle> allGatherAsync(const void* send, void* recv, size_t send_count, DataType dtype,
                                      const ReduceOptions& options = {});
  // Reduces every peer's `send` (group size x recv_count elements) and leaves block group_rank of the
  // result (`recv_count` elements) in `recv`. In place: recv == send + group_rank x recv_count elements.
  Result<ReduceInfo> reduceScatter(const void* send, void* recv, size_t recv_count, DataType dtype, RedOp op,
                                   const ReduceOptions& options = {});
  Result<ReduceHandle> reduceScatterAsync(const void* send, void* recv, size_t recv_count, DataType dtype, RedOp op,
                                          const ReduceOptions& options = {});
  // Returns once every peer of the group has called it (a collective without data; uses options.tag).
  Result<ReduceInfo> barrier(const ReduceOptions& options = {});
  Result<ReduceHandle> barrierAsync(const ReduceOptions& options = {});
  // Makes this peer's shared state equal to the group's elected one (docs/shared_state.md): every
  // peer of the group calls it; out-of-date peers fetch only the tensors that differ, from the peers
  // that hold the elected content, and verify them. Blocks until the group is done (op_timeout_ms).
  // Needs a member with no collective in flight. On failure the revision is unchanged and fetched
  // tensors may hold partial content: call again (after updateTopology() when a peer was lost).
  Result<SyncInfo> syncSharedState(SharedState& state, SyncStrategy strategy = SyncStrategy::kEnforcePopular);
  Topology topology() const;
  PeerId id() const;
  uint16_t listenPort() const;
  // "none" in a plain run; else the cipher this peer offers: "AES-256-GCM" (AES-NI here) or
  // "ChaCha20-Poly1305". A connection uses AES-256-GCM only when both of its ends offer it.
  const char* cipher() const;
  CommStats stats() const;         // counters since create(); any thread, never blocks
  std::string lastError() const;   // detail of the last failure
  Status leave();                  // graceful; idempotent

 private:
  class Impl;
  friend struct detail::CommAccess;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

PCCL_API std::string formatPeerId(const PeerId& id);

}  // namespace pccl

#endif  // PCCL_COMMUNICATOR_HPP_
