// ElasticReducer: the trainer's side of pccl. Keeps the ring current (arePeersPending → updateTopology
// once per outer step) and averages a float32 buffer, retrying after updateTopology when a peer is lost.
// Used from the trainer's one thread only.
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

class ElasticReducer {
 public:
  // Joins the run at `master` ("HOST:PORT"); blocks until admitted.
  static pccl::Result<std::unique_ptr<ElasticReducer>> connect(const std::string& master, uint32_t worker);

  // Admits joiners and drops departed peers when the master says the ring is stale.
  pccl::Status syncMembership();
  // Before training: admits joiners until at least `world` peers are in the ring, or the deadline.
  pccl::Status waitForWorld(uint32_t world, uint32_t timeout_ms);
  // In place: data := average of every peer's data. On PeerLost/Mismatch/Timeout: updateTopology, retry.
  pccl::Result<ReduceStats> allReduceAvg(float* data, size_t count, pccl::Quant quant);
  uint32_t worldSize() const { return comm_->topology().world_size; }

 private:
  ElasticReducer(std::unique_ptr<pccl::Communicator> comm, uint32_t worker) : comm_(std::move(comm)), worker_(worker) {}
  pccl::Status updateTopology();

  std::unique_ptr<pccl::Communicator> comm_;
  uint32_t worker_;
};

// "none|fp16|bf16|int8" → Quant; false for anything else.
bool parseQuant(const std::string& name, pccl::Quant& quant);

}  // namespace diloco

#endif  // PCCL_EXAMPLES_DILOCO_ELASTIC_REDUCER_HPP_
