// The test_wire binary's global operator new and delete (alloc_watch.hpp): every allocation's size is
// noted while a test holds an AllocWatch.
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "alloc_watch.hpp"

// The replaced operator new/delete below pair malloc with free; GCC's inliner cannot see that.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace pccl::test {
std::atomic<bool> g_track_allocs{false};
std::atomic<size_t> g_max_alloc{0};
}  // namespace pccl::test

namespace {
void noteAlloc(size_t n) {
  using pccl::test::g_max_alloc;
  if (!pccl::test::g_track_allocs.load(std::memory_order_relaxed)) return;
  size_t cur = g_max_alloc.load(std::memory_order_relaxed);
  while (n > cur && !g_max_alloc.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
}
}  // namespace

void* operator new(std::size_t n) {
  noteAlloc(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  noteAlloc(n);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
// Every replaced new pairs with free (ASan checks that allocation and release functions match).
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
