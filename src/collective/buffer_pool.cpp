#include "collective/buffer_pool.hpp"

#include <algorithm>
#include <cstring>

namespace pccl::collective {

BufferPool::Buffer BufferPool::acquire(size_t bytes) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->capacity >= bytes && (best == idle_.end() || it->capacity < best->capacity)) best = it;
    }
    if (best != idle_.end()) {
      Buffer b = std::move(*best);
      idle_.erase(best);
      return b;
    }
  }
  Buffer b;
  b.capacity = bytes;
  b.data.reset(new uint8_t[bytes == 0 ? 1 : bytes]);
  std::memset(b.data.get(), 0, bytes);  // pre-fault now, not on the data path
  return b;
}

void BufferPool::release(Buffer b) {
  if (!b.data) return;
  std::lock_guard<std::mutex> lk(mu_);
  idle_.push_back(std::move(b));
  if (idle_.size() > max_idle_) {
    auto smallest = std::min_element(idle_.begin(), idle_.end(),
                                     [](const Buffer& x, const Buffer& y) { return x.capacity < y.capacity; });
    idle_.erase(smallest);
  }
}

size_t BufferPool::idleBytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  size_t n = 0;
  for (const auto& b : idle_) n += b.capacity;
  return n;
}

}  // namespace pccl::collective
