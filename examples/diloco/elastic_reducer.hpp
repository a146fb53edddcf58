// ElasticReducer: the trainer's side of pccl. Keeps the ring current (arePeersPending → updateTopology
// once per outer step), averages a float32 buffer (retrying after updateTopology when a peer is lost),
// and keeps the trainer's shared state (outer weights, outer momentum, step counter) equal across the
// group with syncSharedState. Used from the trainer's one thread only.
//
// The sync rule. syncSharedState is a collective of the group, so every member must call it at the same
// point. Every member sees the same outcome of an updateTopology (the same new epoch, the same ring),
// and a joiner's connect() returns from that very ring build. So: every worker syncs right after every
// epoch change it sees, before it does anything else with pccl:
//   * after connect() (the initial world, or a late joiner admitted by the others' updateTopology);
//   * after every successful updateTopology, wherever it happened: syncMembership() at the top of an
//     outer step, waitForWorld(), the retry path of allReduceAvg() (a peer was lost, or a peer voted
//     while we started the all-reduce: the new ring may hold a joiner, which is syncing right now),
//     or the retry path of a failed sync itself.
// Every member then meets the joiner in the sync; afterwards each goes on where it was (a worker in the
// all-reduce retry path retries it with its pseudo-gradient, the others do their inner steps, the joiner
// starts its first outer step) and they all meet again in the next all-reduce. When nothing joined the
// sync moves nothing (every tensor is already equal): it costs one hash of the state per peer.
#ifndef PCCL_EXAMPLES_DILOCO_ELASTIC_REDUCER_HPP_
#define PCCL_EXAMPLES_DILOCO_ELASTIC_REDUCER_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "pccl/communicator.hpp"
#include "pccl/status.hpp"
#include "pccl/types.hpp"

namespace diloco {

struct ReduceStats {
  uint64_t tx_bytes = 0;    // payload bytes this worker sent, over every attempt
  uint32_t world_size = 0;  // peers in the attempt that succeeded
  uint32_t retries = 0;     // attempts that failed before it
  double seconds = 0;
};

// An all-reduce started by ElasticReducer::startAllReduceAvg, ended by finishAllReduceAvg.
struct PendingReduce {
  pccl::ReduceHandle handle;
  pccl::Status start;  // a start that failed: finishAllReduceAvg deals with it
};

struct SyncTotals {
  uint32_t syncs = 0;          // successful syncs
  uint32_t state_changes = 0;  // of which replaced some of this worker's tensors
  uint64_t tx_bytes = 0, rx_bytes = 0;
};

class ElasticReducer {
 public:
  // Joins the run at `master` ("HOST:PORT"); blocks until admitted, then syncs `state` with the group
  // (see the sync rule above). `state` (its tensors and revision) is the caller's and must outlive the
  // reducer; the reducer reads and overwrites it only inside its own calls. `late_join`: the first
  // sync is receive-only (this worker offers nothing) unless it is alone in its group.
  static pccl::Result<std::unique_ptr<ElasticReducer>> connect(const std::string& master, uint32_t worker,
                                                              pccl::SharedState* state, bool late_join);

  // Admits joiners and drops departed peers when the master says the ring is stale; syncs after a change.
  pccl::Status syncMembership();
  // Admits joiners until at least `world` peers are in the ring, or the deadline.
  pccl::Status waitForWorld(uint32_t world, uint32_t timeout_ms);
  // In place: data := average of every peer's data. On PeerLost/TopologyChanged/Timeout: updateTopology, sync
  // (the epoch changed), retry. `data` must not be part of the shared state.
  pccl::Result<ReduceStats> allReduceAvg(float* data, size_t count, pccl::Quant quant);
  // The same in the background (Streaming DiLoCo's delayed fragments): `data` belongs to pccl until
  // finishAllReduceAvg (the same data, count and quant), which waits for it. On PeerLost/TopologyChanged/
  // Timeout it re-forms the ring (updateTopology and the sync) and retries as allReduceAvg does, at once:
  // a worker that voted while this one started the all-reduce has not started it yet, and starts it
  // after the sync, with the joiner the vote admitted.
  PendingReduce startAllReduceAvg(float* data, size_t count, pccl::Quant quant);
  pccl::Result<ReduceStats> finishAllReduceAvg(const PendingReduce& pending, float* data, size_t count,
                                               pccl::Quant quant);
  // One sync of the shared state; on PeerLost/TopologyChanged/Timeout: updateTopology, then sync again.
  // Every member of the group must call it at the same point (the rule above calls it for you).
  pccl::Result<pccl::SyncInfo> syncState();

  uint32_t worldSize() const { return comm_->topology().world_size; }
  uint64_t epoch() const { return comm_->topology().epoch; }
  pccl::CommStats stats() const { return comm_->stats(); }
  const SyncTotals& syncTotals() const { return totals_; }

 private:
  ElasticReducer(std::unique_ptr<pccl::Communicator> comm, uint32_t worker, pccl::SharedState* state,
                 bool late_join)
      : comm_(std::move(comm)), worker_(worker), state_(state), late_join_(late_join) {}
  pccl::Status updateTopology();    // retries recoverable failures; does not sync
  pccl::Status syncIfEpochChanged();  // the rule: sync when the epoch differs from the last sync's
  pccl::Status reform() {           // updateTopology, then the sync every member makes after it
    PCCL_RETURN_IF_ERROR(updateTopology());
    return syncIfEpochChanged();
  }

  std::unique_ptr<pccl::Communicator> comm_;
  uint32_t worker_;
  pccl::SharedState* state_;
  bool late_join_;
  bool synced_ = false;        // a sync has succeeded
  uint64_t synced_epoch_ = 0;  // the epoch of the last successful sync
  SyncTotals totals_;
};

// "none|fp16|bf16|int8" → Quant; false for anything else.
bool parseQuant(const std::string& name, pccl::Quant& quant);

}  // namespace diloco

#endif  // PCCL_EXAMPLES_DILOCO_ELASTIC_REDUCER_HPP_
