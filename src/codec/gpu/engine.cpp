#include "codec/gpu/engine.hpp"

#include <fmt/format.h>

#include <utility>

#include "codec/gpu/loader.hpp"

namespace pccl::codec::gpu {

namespace {
// Cached blocks are reused for requests between half their size and their size.
constexpr size_t kReuseFactor = 2;
// Beyond this many cached bytes (pinned and device together) a returned block is freed instead:
// pinned memory is scarce, and operations of ever new sizes must not pile blocks up.
constexpr size_t kMaxCachedBytes = size_t{4} << 30;
}  // namespace

// ---- Block ----------------------------------------------------------------------------------------

Block& Block::operator=(Block&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::exchange(o.owner_, nullptr);
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    pinned_ = o.pinned_;
  }
  return *this;
}

void Block::reset() {
  if (owner_ != nullptr && p_ != nullptr) owner_->giveBack(p_, bytes_, pinned_);
  owner_ = nullptr;
  p_ = nullptr;
  bytes_ = 0;
}

// ---- JobContext ---------------------------------------------------------------------------------

Status JobContext::check(int rc, const char* what) const { return gpuStatus(api, rc, what); }

Result<uint8_t*> JobContext::scratch(size_t bytes) {
  if (scratch_block == nullptr) return Status::internal("no scratch outside the engine's worker");
  if (scratch_block->size() < bytes) {
    scratch_block->reset();
    PCCL_ASSIGN_OR_RETURN(*scratch_block, engine->pinned(bytes));
  }
  return scratch_block->data();
}

// ---- Engine -------------------------------------------------------------------------------------

Result<std::unique_ptr<Engine>> Engine::open() {
  PCCL_ASSIGN_OR_RETURN(const pcclGpuBackend_t* b, processBackend());
  int count = 0;
  PCCL_RETURN_IF_ERROR(gpuStatus(*b, b->device_count(&count), "device_count"));
  if (count <= 0) return Status::unsupported(fmt::format("{} backend: no GPU is visible to this process", b->name));
  std::unique_ptr<Engine> e(new Engine(*b));
  PCCL_RETURN_IF_ERROR(e->start());
  return e;
}

Status Engine::start() {
  PCCL_RETURN_IF_ERROR(gpuStatus(api_, api_.stream_create(&worker_stream_), "stream_create"));
  PCCL_RETURN_IF_ERROR(gpuStatus(api_, api_.stream_create(&now_stream_), "stream_create"));
  worker_ = std::thread([this] { workerLoop(); });
  return Status::ok();
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (worker_stream_ != nullptr) api_.stream_destroy(worker_stream_);
  if (now_stream_ != nullptr) api_.stream_destroy(now_stream_);
  for (const Cached& c : cache_) (c.pinned ? api_.host_free : api_.device_free)(c.p);
}

Result<int> Engine::deviceOf(const void* p) const {
  int device = -1;
  PCCL_RETURN_IF_ERROR(gpuStatus(api_, api_.pointer_device(p, &device), "pointer_device"));
  return device;
}

Status Engine::bind(int device) {
  std::lock_guard<std::mutex> lk(mu_);
  if (device_ == -1) {
    device_ = device;
    return Status::ok();
  }
  if (device_ != device) {
    return Status::invalidArgument(fmt::format(
        "this communicator's device buffers live on GPU {}; a buffer on GPU {} needs another communicator", device_,
        device));
  }
  return Status::ok();
}

Status Engine::useDevice() const {
  int device;
  {
    std::lock_guard<std::mutex> lk(mu_);
    device = device_;
  }
  if (device < 0) return Status::ok();
  return gpuStatus(api_, api_.set_device(device), "set_device");
}

Result<Block> Engine::acquire(size_t bytes, bool pinned) {
  Block b;
  b.owner_ = this;
  b.pinned_ = pinned;
  {
    std::lock_guard<std::mutex> lk(cache_mu_);
    for (size_t i = 0; i < cache_.size(); ++i) {
      const Cached& c = cache_[i];
      if (c.pinned == pinned && c.bytes >= bytes && c.bytes <= bytes * kReuseFactor) {
        b.p_ = c.p;
        b.bytes_ = c.bytes;
        cached_bytes_ -= c.bytes;
        cache_.erase(cache_.begin() + static_cast<std::ptrdiff_t>(i));
        return b;
      }
    }
  }
  PCCL_RETURN_IF_ERROR(useDevice());
  void* p = nullptr;
  const int rc = pinned ? api_.host_alloc(&p, bytes) : api_.device_alloc(&p, bytes);
  PCCL_RETURN_IF_ERROR(gpuStatus(api_, rc, pinned ? "host_alloc (pinned)" : "device_alloc")
                           .withContext(fmt::format("{} bytes", bytes)));
  b.p_ = p;
  b.bytes_ = bytes;
  return b;
}

void Engine::giveBack(void* p, size_t bytes, bool pinned) {
  {
    std::lock_guard<std::mutex> lk(cache_mu_);
    if (cached_bytes_ + bytes <= kMaxCachedBytes) {
      cache_.push_back(Cached{p, bytes, pinned});
      cached_bytes_ += bytes;
      return;
    }
  }
  (pinned ? api_.host_free : api_.device_free)(p);
}

void Engine::submit(Job job, Done done) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.emplace_back(std::move(job), std::move(done));
  }
  cv_.notify_one();
}

void Engine::workerLoop() {
  Compressor compressor;
  Block scratch;
  for (;;) {
    std::pair<Job, Done> next;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, and nothing left
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    JobContext ctx{api_, worker_stream_, &compressor, this};
    ctx.scratch_block = &scratch;
    Status st = useDevice();
    if (st.isOk()) st = next.first(ctx);
    if (next.second) next.second(st);
  }
}

Status Engine::runNow(const Job& job) {
  std::lock_guard<std::mutex> lk(now_mu_);
  PCCL_RETURN_IF_ERROR(useDevice());
  JobContext ctx{api_, now_stream_, nullptr, this};
  PCCL_RETURN_IF_ERROR(job(ctx));
  return gpuStatus(api_, api_.stream_synchronize(now_stream_), "stream_synchronize");
}

}  // namespace pccl::codec::gpu
