// A communicator's handle on its GPU: the loaded backend (loader.hpp), the device it is bound to,
// caches of pinned host and device memory, and one worker thread that runs device jobs in order on
// its own stream. The ring hands it one job per segment (upload what arrived, decode/combine/encode
// on the GPU, download the wire bytes, zstd), so the io thread never waits for the GPU and the
// network keeps moving while the GPU works.
//
// Thread-safety: every member function may be called from any thread. Jobs run on the worker; their
// `done` callbacks too (post them onward yourself).
#ifndef PCCL_CODEC_GPU_ENGINE_HPP_
#define PCCL_CODEC_GPU_ENGINE_HPP_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "codec/compress.hpp"
#include "codec/gpu/backend_abi.h"
#include "pccl/status.hpp"

namespace pccl::codec::gpu {

class Engine;

// Memory from an engine's caches; goes back to them when destroyed or reset.
class Block {
 public:
  Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  Block(Block&& o) noexcept { *this = std::move(o); }
  Block& operator=(Block&& o) noexcept;
  ~Block() { reset(); }
  void reset();
  uint8_t* data() const { return static_cast<uint8_t*>(p_); }
  size_t size() const { return bytes_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  friend class Engine;
  Engine* owner_ = nullptr;
  void* p_ = nullptr;
  size_t bytes_ = 0;
  bool pinned_ = false;
};

// What a job gets: the backend, a stream, and (on the worker) zstd contexts and a pinned scratch.
struct JobContext {
  const pcclGpuBackend_t& api;
  pcclGpuStream_t stream;
  Compressor* compressor;  // worker jobs only
  Engine* engine;
  Status check(int rc, const char* what) const;
  // A pinned buffer of at least `bytes`, owned by the worker (valid until its next call).
  Result<uint8_t*> scratch(size_t bytes);
  Block* scratch_block = nullptr;
};

class Engine {
 public:
  using Job = std::function<Status(JobContext&)>;
  using Done = std::function<void(const Status&)>;

  // Loads the process's backend (Unsupported when there is none) and checks it sees a device.
  static Result<std::unique_ptr<Engine>> open();
  ~Engine();  // runs what is queued, then stops the worker; frees every cached block

  const pcclGpuBackend_t& api() const { return api_; }
  // The GPU that owns `p`, or -1 for host memory.
  Result<int> deviceOf(const void* p) const;
  // Binds the engine to `device` on first use; a different device later is InvalidArgument.
  Status bind(int device);

  Result<Block> pinned(size_t bytes) { return acquire(bytes, true); }
  Result<Block> device(size_t bytes) { return acquire(bytes, false); }

  // Runs `job` on the worker thread (submission order), then `done` with its status, also there.
  void submit(Job job, Done done);
  // Runs `job` on the calling thread with the engine's second stream and waits for that stream.
  Status runNow(const Job& job);

 private:
  friend class Block;
  explicit Engine(const pcclGpuBackend_t& api) : api_(api) {}
  Status start();
  Result<Block> acquire(size_t bytes, bool pinned);
  void giveBack(void* p, size_t bytes, bool pinned);
  void workerLoop();
  Status useDevice() const;

  const pcclGpuBackend_t& api_;
  int device_ = -1;
  pcclGpuStream_t worker_stream_ = nullptr;
  pcclGpuStream_t now_stream_ = nullptr;
  std::mutex now_mu_;  // runNow's stream is shared by its callers

  struct Cached {
    void* p;
    size_t bytes;
    bool pinned;
  };
  std::mutex cache_mu_;
  std::vector<Cached> cache_;
  size_t cached_bytes_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Job, Done>> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace pccl::codec::gpu

#endif  // PCCL_CODEC_GPU_ENGINE_HPP_
