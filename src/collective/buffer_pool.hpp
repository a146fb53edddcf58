// Reusable, pre-faulted scratch buffers (the saved input of in-place operations), so that steady-state
// all-reduces allocate nothing buffer-sized. Thread-safe.
#ifndef PCCL_COLLECTIVE_BUFFER_POOL_HPP_
#define PCCL_COLLECTIVE_BUFFER_POOL_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace pccl::collective {

class BufferPool {
 public:
  struct Buffer {
    std::unique_ptr<uint8_t[]> data;
    size_t capacity = 0;
  };

  explicit BufferPool(size_t max_idle = 4) : max_idle_(max_idle) {}
  // The smallest idle buffer that fits, or a new one (touched page by page so it is resident).
  Buffer acquire(size_t bytes);
  void release(Buffer b);  // keeps at most max_idle buffers, dropping the smallest
  size_t idleBytes() const;

 private:
  mutable std::mutex mu_;
  std::vector<Buffer> idle_;
  size_t max_idle_;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_BUFFER_POOL_HPP_
