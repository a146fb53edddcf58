// Destroying a communicator ends every request it holds: all-reduces announced and waiting for the
// others, running ones, and ones handed to the io thread but not yet submitted — also while the io
// thread is busy. Every ReduceHandle::wait() returns InvalidUsage, whether it was waiting before,
// during or after the destruction, and nothing hangs.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <vector>

#include "api/comm_impl.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

constexpr auto kDeadline = std::chrono::seconds(30);  // generous: a loaded machine must still pass

CommConfig teardownConfig() {
  CommConfig c = fastCommConfig(0);
  c.op_timeout_ms = 600000;  // far beyond the test: only the destruction may end the operations
  return c;
}

struct Buffers {
  std::vector<float> in, out;
  explicit Buffers(size_t n) : in(n, 1.0f), out(n, 0.0f) {}
};

// Starts an all-reduce of `bufs` on `comm` under `tag` (peer 1 never joins it, so it stays in flight).
ReduceHandle start(Communicator& comm, Buffers& bufs, uint64_t tag) {
  ReduceOptions o;
  o.tag = tag;
  auto h = comm.allReduceAsync(bufs.in.data(), bufs.out.data(), bufs.in.size(), DataType::kFloat32, RedOp::kSum, o);
  REQUIRE(h.isOk());
  return *h;
}

// Waits on `h` from another thread; the future holds its outcome.
std::future<Status> waitAsync(const ReduceHandle& h) {
  return std::async(std::launch::async, [h] { return h.wait().status(); });
}

void requireDestroyed(std::future<Status>& f) {
  REQUIRE(f.wait_for(kDeadline) == std::future_status::ready);
  const Status s = f.get();
  CHECK(s.code() == Code::kInvalidUsage);
  CHECK(s.message().find("destroyed") != std::string::npos);
}

}  // namespace

TEST_CASE("teardown: destroying a peer fails its all-reduces in flight, waited on before and after", "[teardown]") {
  LocalCluster cluster = startCluster(2, teardownConfig());
  REQUIRE(cluster.peers.size() == 2);
  std::vector<Buffers> bufs(6, Buffers(1000));
  std::vector<ReduceHandle> handles;
  for (uint64_t tag = 0; tag < bufs.size(); ++tag) handles.push_back(start(*cluster.peers[0], bufs[tag], tag));
  std::vector<std::future<Status>> early;  // waiting while the communicator is destroyed
  for (size_t i = 0; i < 3; ++i) early.push_back(waitAsync(handles[i]));
  auto destroyed = std::async(std::launch::async, [&] { cluster.peers[0].reset(); });
  REQUIRE(destroyed.wait_for(kDeadline) == std::future_status::ready);
  for (auto& f : early) requireDestroyed(f);
  for (size_t i = 3; i < handles.size(); ++i) {  // waited on after the communicator is gone
    CHECK(handles[i].test());
    auto late = waitAsync(handles[i]);
    requireDestroyed(late);
  }
  // The survivor is told and stays usable.
  CHECK(cluster.master->waitFor([](const MasterStats& s) { return s.accepted == 1; }, 10000));
}

TEST_CASE("teardown: destroying while the io thread is blocked fails queued and running all-reduces", "[teardown]") {
  LocalCluster cluster = startCluster(2, teardownConfig());
  REQUIRE(cluster.peers.size() == 2);
  Communicator& comm = *cluster.peers[0];
  auto& impl = detail::CommAccess::impl(comm);
  std::vector<Buffers> bufs(5, Buffers(1000));
  std::vector<ReduceHandle> handles;
  handles.push_back(start(comm, bufs[0], 0));  // announced before the io thread blocks
  handles.push_back(start(comm, bufs[1], 1));
  // Block the io thread until the destructor has told it to stop: the leave cannot run, and what is
  // queued behind the block never runs on the io thread.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> blocking;
  impl.postForTest([released, &blocking] {
    blocking.set_value();
    released.wait();
  });
  REQUIRE(blocking.get_future().wait_for(kDeadline) == std::future_status::ready);
  for (uint64_t tag = 2; tag < bufs.size(); ++tag) handles.push_back(start(comm, bufs[tag], tag));  // queued
  impl.setStopHookForTest([&release] { release.set_value(); });
  std::vector<std::future<Status>> waits;
  for (const auto& h : handles) waits.push_back(waitAsync(h));
  auto destroyed = std::async(std::launch::async, [&] { cluster.peers[0].reset(); });
  REQUIRE(destroyed.wait_for(kDeadline) == std::future_status::ready);
  for (auto& f : waits) requireDestroyed(f);
  CHECK(cluster.master->waitFor([](const MasterStats& s) { return s.accepted == 1; }, 10000));
}

TEST_CASE("teardown: destroying a peer whose all-reduces are running fails or completes each, never hangs",
          "[teardown]") {
  LocalCluster cluster = startCluster(2, teardownConfig());
  REQUIRE(cluster.peers.size() == 2);
  constexpr size_t kOps = 4;
  constexpr size_t kCount = 1 << 20;
  std::vector<Buffers> mine(kOps, Buffers(kCount)), theirs(kOps, Buffers(kCount));
  std::vector<ReduceHandle> handles, other;
  for (uint64_t tag = 0; tag < kOps; ++tag) {
    handles.push_back(start(*cluster.peers[0], mine[tag], tag));
    other.push_back(start(*cluster.peers[1], theirs[tag], tag));
  }
  std::vector<std::future<Status>> waits;
  for (const auto& h : handles) waits.push_back(waitAsync(h));
  auto destroyed = std::async(std::launch::async, [&] { cluster.peers[0].reset(); });
  REQUIRE(destroyed.wait_for(kDeadline) == std::future_status::ready);
  for (auto& f : waits) {
    REQUIRE(f.wait_for(kDeadline) == std::future_status::ready);
    const Status s = f.get();  // finished before the destruction reached it, or failed by it
    if (!s.isOk()) CHECK(s.code() == Code::kInvalidUsage);
  }
  for (auto& h : other) {  // the survivor's side ends too: done, or aborted because we left
    auto f = waitAsync(h);
    REQUIRE(f.wait_for(kDeadline) == std::future_status::ready);
  }
}
