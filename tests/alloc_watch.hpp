// The wire tests' allocation watch: the global operator new of the test_wire binary is replaced
// (wire_alloc_watch.cpp) so tests can assert that hostile lengths and counts never drive a large
// allocation. Tracking is off unless a test holds an AllocWatch.
#ifndef PCCL_TESTS_ALLOC_WATCH_HPP_
#define PCCL_TESTS_ALLOC_WATCH_HPP_

#include <atomic>
#include <cstddef>

namespace pccl::test {

extern std::atomic<bool> g_track_allocs;
extern std::atomic<size_t> g_max_alloc;

struct AllocWatch {
  AllocWatch() {
    g_max_alloc.store(0);
    g_track_allocs.store(true);
  }
  ~AllocWatch() { g_track_allocs.store(false); }
  AllocWatch(const AllocWatch&) = delete;
  AllocWatch& operator=(const AllocWatch&) = delete;
  size_t maxSoFar() const { return g_max_alloc.load(); }
};

}  // namespace pccl::test

#endif  // PCCL_TESTS_ALLOC_WATCH_HPP_
