#include "elastic_reducer.hpp"

#include <chrono>
#include <cstdio>
#include <thread>

namespace diloco {
namespace {

constexpr uint32_t kMaxAttempts = 20;

bool isRecoverable(pccl::Code code) {
  return code == pccl::Code::kPeerLost || code == pccl::Code::kMismatch || code == pccl::Code::kTimeout;
}

}  // namespace

pccl::Result<std::unique_ptr<ElasticReducer>> ElasticReducer::connect(const std::string& master, uint32_t worker) {
  pccl::CommConfig config;
  config.master_address = master;
  config.listen_address = "127.0.0.1:0";
  config.peer_timeout_ms = 5000;  // a killed worker's sockets break at once; a frozen one is dropped after this
  auto comm = pccl::Communicator::create(config);
  if (!comm.isOk()) return comm.status();
  PCCL_RETURN_IF_ERROR((*comm)->connect());
  return std::unique_ptr<ElasticReducer>(new ElasticReducer(std::move(*comm), worker));
}

pccl::Status ElasticReducer::updateTopology() {
  for (uint32_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
    pccl::Status s = comm_->updateTopology();
    if (s.isOk()) {
      std::printf("worker=%u topology epoch=%llu world=%u\n", worker_,
                  static_cast<unsigned long long>(comm_->topology().epoch), comm_->topology().world_size);
      std::fflush(stdout);
      return s;
    }
    if (!isRecoverable(s.code())) return s;
    std::printf("worker=%u updateTopology failed (%s), retrying\n", worker_, s.toString().c_str());
  }
  return pccl::Status::timeout("updateTopology kept failing");
}

pccl::Status ElasticReducer::syncMembership() {
  auto pending = comm_->arePeersPending();
  if (!pending.isOk()) return pending.status();
  return *pending ? updateTopology() : pccl::Status::ok();
}

pccl::Status ElasticReducer::waitForWorld(uint32_t world, uint32_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (worldSize() < world) {
    if (std::chrono::steady_clock::now() > deadline) {
      return pccl::Status::timeout("only " + std::to_string(worldSize()) + " of " + std::to_string(world) +
                                   " workers joined");
    }
    PCCL_RETURN_IF_ERROR(syncMembership());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pccl::Status::ok();
}

pccl::Result<ReduceStats> ElasticReducer::allReduceAvg(float* data, size_t count, pccl::Quant quant) {
  pccl::ReduceOptions options;
  options.quant = quant;
  ReduceStats stats;
  for (uint32_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto info = comm_->allReduce(data, data, count, pccl::DataType::kFloat32, pccl::RedOp::kAvg, options);
    if (info.isOk()) {
      stats.tx_bytes += info->tx_bytes;
      stats.world_size = info->world_size;
      stats.seconds += info->seconds;
      return stats;
    }
    if (!isRecoverable(info.status().code())) return info.status();
    ++stats.retries;  // `data` still holds our input: pccl restores an in-place buffer on failure
    std::printf("worker=%u all-reduce failed (%s): updating the topology and retrying\n", worker_,
                info.status().toString().c_str());
    std::fflush(stdout);
    PCCL_RETURN_IF_ERROR(updateTopology());
  }
  return pccl::Status::timeout("all-reduce kept failing");
}

bool parseQuant(const std::string& name, pccl::Quant& quant) {
  if (name == "none") quant = pccl::Quant::kNone;
  else if (name == "fp16") quant = pccl::Quant::kFp16;
  else if (name == "bf16") quant = pccl::Quant::kBf16;
  else if (name == "int8") quant = pccl::Quant::kInt8;
  else return false;
  return true;
}

}  // namespace diloco
