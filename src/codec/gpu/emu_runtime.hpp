// An emulated GPU runtime, so that the GPU kernels (device_kernels.hpp) run on the CPU in CI: the
// same kernel source, compiled by the host compiler, executed one thread block at a time with each
// GPU thread as a fiber (ucontext) on the calling thread; __syncthreads() switches to the next fiber.
// "Device" memory is host memory (tracked, so pointer_device can tell it from other memory), streams
// run their work at once. Used only by libpccl-gpu-emu.so (emu_backend.cpp), a test module: it checks
// the kernels' indexing, block reductions and header handling against the CPU codec on every build.
// Included through gpu_runtime.hpp when PCCL_GPU_RUNTIME_EMULATED is defined.
#ifndef PCCL_CODEC_GPU_EMU_RUNTIME_HPP_
#define PCCL_CODEC_GPU_EMU_RUNTIME_HPP_

#include <ucontext.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static  // one block runs at a time, so a function's statics are its shared memory
#define __launch_bounds__(n)

struct EmuDim3 {
  unsigned x = 0, y = 1, z = 1;
};
inline EmuDim3 threadIdx, blockIdx, blockDim, gridDim;  // set by the scheduler before each fiber runs

inline double __longlong_as_double(long long v) {
  double d;
  std::memcpy(&d, &v, sizeof d);
  return d;
}

inline void __syncthreads();

namespace pccl::gpu::rt {

using Error = int;
using Stream = int*;
inline constexpr Error kSuccess = 0;
inline constexpr Error kOutOfMemory = 2;
inline constexpr const char* kName = "emu";

// ---- the block scheduler -------------------------------------------------------------------------------

class Fibers {
 public:
  static Fibers& get() {
    static Fibers f;
    return f;
  }
  // Runs body() as every thread of every block of the grid, in block order.
  void run(unsigned grid, unsigned block, const std::function<void()>& body) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ctx_.size() < block) {
      ctx_.resize(block);
      stacks_.resize(static_cast<size_t>(block) * kStack);
      done_.resize(block);
    }
    body_ = &body;
    gridDim.x = grid;
    blockDim.x = block;
    for (unsigned b = 0; b < grid; ++b) {
      blockIdx.x = b;
      // Thread 0 first. A block reaches __syncthreads() in all of its threads or in none (as CUDA and
      // HIP require), so if thread 0 ends without one, the others run straight through, unswitched (and
      // their fibers are never made: getcontext costs a system call).
      start(0);
      bool synced = false;
      resume(0, &synced);
      if (done_[0] && !synced) {
        for (unsigned t = 1; t < block; ++t) {
          threadIdx.x = t;
          (*body_)();
        }
        continue;
      }
      for (unsigned t = 1; t < block; ++t) start(t);
      // Rounds: each fiber to its next barrier (thread 0 is already at its first).
      unsigned left = block - (done_[0] ? 1 : 0);
      for (unsigned from = 1; left > 0; from = 0) {
        for (unsigned t = from; t < block; ++t) {
          if (done_[t]) continue;
          resume(t, &synced);
          if (done_[t]) --left;
        }
      }
    }
  }
  void barrier() { swapcontext(&ctx_[current_], &main_); }

 private:
  static constexpr size_t kStack = 64 << 10;
  static void entry() {
    Fibers& f = get();
    (*f.body_)();
    f.done_[f.current_] = true;  // then uc_link returns to main_
  }
  void start(unsigned t) {
    getcontext(&ctx_[t]);
    ctx_[t].uc_stack.ss_sp = stacks_.data() + static_cast<size_t>(t) * kStack;
    ctx_[t].uc_stack.ss_size = kStack;
    ctx_[t].uc_link = &main_;
    makecontext(&ctx_[t], &Fibers::entry, 0);
    done_[t] = false;
  }
  // Runs fiber t until its next barrier or its end; *synced |= it stopped at a barrier.
  void resume(unsigned t, bool* synced) {
    current_ = t;
    threadIdx.x = t;
    swapcontext(&main_, &ctx_[t]);
    *synced = *synced || !done_[t];
  }
  std::mutex mu_;
  std::vector<ucontext_t> ctx_;
  std::vector<char> stacks_;
  std::vector<bool> done_;
  ucontext_t main_{};
  unsigned current_ = 0;
  const std::function<void()>* body_ = nullptr;
};

// ---- memory and streams ----------------------------------------------------------------------------

class Memory {
 public:
  static Memory& get() {
    static Memory m;
    return m;
  }
  Error alloc(void** p, size_t bytes, bool device) {
    const size_t rounded = (bytes + 255) / 256 * 256;
    *p = std::aligned_alloc(256, rounded);
    if (*p == nullptr) return kOutOfMemory;
    if (device) {
      std::lock_guard<std::mutex> lock(mu_);
      device_[static_cast<char*>(*p)] = rounded;
    }
    return kSuccess;
  }
  Error release(void* p) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      device_.erase(static_cast<char*>(p));
    }
    std::free(p);
    return kSuccess;
  }
  // Whether p lies inside a device allocation.
  bool isDevice(const void* p) {
    const char* c = static_cast<const char*>(p);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = device_.upper_bound(const_cast<char*>(c));
    if (it == device_.begin()) return false;
    --it;
    return c < it->first + it->second;
  }

 private:
  std::mutex mu_;
  std::map<char*, size_t> device_;  // start -> size
};

inline bool isNoDevice(Error) { return false; }
inline const char* errorString(Error e) { return e == kOutOfMemory ? "out of memory" : "emulated runtime error"; }
inline Error lastError() { return kSuccess; }
inline Error deviceCount(int* n) {
  *n = 1;
  return kSuccess;
}
inline Error setDevice(int d) { return d == 0 ? kSuccess : 1; }
inline Error currentDevice(int* d) {
  *d = 0;
  return kSuccess;
}
inline Error multiprocessors(int* n, int) {
  *n = 1;  // small grids: grid-stride loops do the rest
  return kSuccess;
}
inline Error streamCreate(Stream* s) {
  *s = new (std::nothrow) int(0);
  return *s != nullptr ? kSuccess : kOutOfMemory;
}
inline Error streamDestroy(Stream s) {
  delete s;
  return kSuccess;
}
inline Error streamSynchronize(Stream) { return kSuccess; }
inline Error hostAlloc(void** p, size_t bytes) { return Memory::get().alloc(p, bytes, false); }
inline Error hostFree(void* p) { return Memory::get().release(p); }
inline Error deviceAlloc(void** p, size_t bytes) { return Memory::get().alloc(p, bytes, true); }
inline Error deviceFree(void* p) { return Memory::get().release(p); }
inline Error memcpyAsync(void* dst, const void* src, size_t bytes, int, Stream) {
  std::memmove(dst, src, bytes);
  return kSuccess;
}
inline Error pointerDevice(const void* p, int* device) {
  *device = Memory::get().isDevice(p) ? 0 : -1;
  return kSuccess;
}

template <typename... Params, typename... Args>
Error launch(void (*kernel)(Params...), unsigned grid, unsigned block, size_t, Stream, Args... args) {
  const std::function<void()> body = [&] { kernel(static_cast<Params>(args)...); };
  Fibers::get().run(grid, block, body);
  return kSuccess;
}

}  // namespace pccl::gpu::rt

inline void __syncthreads() { pccl::gpu::rt::Fibers::get().barrier(); }

#endif  // PCCL_CODEC_GPU_EMU_RUNTIME_HPP_
