// Broadcast, all-gather, reduce-scatter and barrier between real peers on loopback: every dtype (and
// op), world sizes 1..7, counts 0/1/odd/large, in and out of place, against the inputs (broadcast,
// all-gather: exact bytes) or the float64 / modular reference (reduce-scatter); quantized and
// compressed forms bit-identical everywhere; concurrency with the all-reduce; agreement checks
// (a different collective, root or count fails everyone with Mismatch); argument errors. Segments are
// tiny (256 bytes) so that every operation is cut into many segments striped over both connections.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstring>
#include <future>

#include "reduce_reference.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

enum class Kind { kBroadcast, kAllGather, kReduceScatter, kBarrier };
const char* kindName(Kind k) {
  switch (k) {
    case Kind::kBroadcast: return "broadcast";
    case Kind::kAllGather: return "allgather";
    case Kind::kReduceScatter: return "reducescatter";
    case Kind::kBarrier: return "barrier";
  }
  return "?";
}

struct Case {
  Kind kind;
  DataType dtype;
  RedOp op;
  size_t count;  // the user's count: broadcast's elements, all-gather's per rank, reduce-scatter's per rank
  bool in_place;
  uint32_t root;
  Quant quant = Quant::kNone;
  int compress = 0;
};

std::string describe(const Case& c) {
  return std::string(kindName(c.kind)) + " " + typeName(c.dtype) + " " + opName(c.op) +
         " count=" + std::to_string(c.count) + (c.in_place ? " in-place" : " out-of-place") +
         " root=" + std::to_string(c.root) + " quant=" + std::to_string(static_cast<int>(c.quant)) +
         " compress=" + std::to_string(c.compress);
}

// Group rank `rank`'s input of case `i`: the whole of it (all-gather: its block; reduce-scatter: world
// blocks).
std::vector<uint8_t> inputOf(const Case& c, size_t i, uint32_t rank, size_t world) {
  const size_t n = c.kind == Kind::kReduceScatter ? c.count * world : c.count;
  return makeInput(c.dtype, c.kind == Kind::kReduceScatter ? c.op : RedOp::kSum, n, rank, i);
}

// Runs case `i` on one peer; returns what it holds afterwards (the receive buffer's bytes).
Result<std::vector<uint8_t>> runCase(Communicator& comm, const Case& c, size_t i, size_t world) {
  const uint32_t rank = comm.topology().group_rank;
  const size_t elem = sizeOf(c.dtype);
  std::vector<uint8_t> in = inputOf(c, i, rank, world);
  ReduceOptions o;
  o.tag = i;
  o.quant = c.quant;
  o.compress = c.compress;
  Result<ReduceInfo> r = Status::ok();
  switch (c.kind) {
    case Kind::kBroadcast: {
      if (c.in_place) {
        r = comm.broadcast(in.data(), in.data(), c.count, c.dtype, c.root, o);
        if (!r.isOk()) return r.status();
        return in;
      }
      std::vector<uint8_t> out(in.size(), 0xEE);
      // A non-root's send is not read: pass null on every other case.
      const void* send = rank != c.root && i % 2 == 1 ? nullptr : in.data();
      r = comm.broadcast(send, out.data(), c.count, c.dtype, c.root, o);
      if (!r.isOk()) return r.status();
      return out;
    }
    case Kind::kAllGather: {
      std::vector<uint8_t> out(c.count * world * elem, 0xEE);
      if (c.in_place) {
        if (!in.empty()) std::memcpy(out.data() + rank * in.size(), in.data(), in.size());
        r = comm.allGather(out.data() + rank * in.size(), out.data(), c.count, c.dtype, o);
      } else {
        r = comm.allGather(in.data(), out.data(), c.count, c.dtype, o);
      }
      if (!r.isOk()) return r.status();
      return out;
    }
    case Kind::kReduceScatter: {
      if (c.in_place) {
        uint8_t* own = in.data() + rank * c.count * elem;
        r = comm.reduceScatter(in.data(), own, c.count, c.dtype, c.op, o);
        if (!r.isOk()) return r.status();
        return std::vector<uint8_t>(own, own + c.count * elem);
      }
      std::vector<uint8_t> out(c.count * elem, 0xEE);
      r = comm.reduceScatter(in.data(), out.data(), c.count, c.dtype, c.op, o);
      if (!r.isOk()) return r.status();
      return out;
    }
    case Kind::kBarrier:
      r = comm.barrier(o);
      if (!r.isOk()) return r.status();
      return std::vector<uint8_t>();
  }
  return Status::internal("unknown kind");
}

// Checks what group rank `rank` holds after case `i`. Empty when right.
std::string check(const Case& c, size_t i, uint32_t rank, size_t world, const std::vector<uint8_t>& got) {
  const size_t elem = sizeOf(c.dtype);
  switch (c.kind) {
    case Kind::kBroadcast:
      if (got != inputOf(c, i, c.root, world)) return "not the root's input";
      return "";
    case Kind::kAllGather: {
      std::vector<uint8_t> want;
      for (uint32_t r = 0; r < world; ++r) {
        auto b = inputOf(c, i, r, world);
        want.insert(want.end(), b.begin(), b.end());
      }
      return got == want ? "" : "not every rank's input in rank order";
    }
    case Kind::kReduceScatter: {
      std::vector<std::vector<uint8_t>> blocks;
      for (uint32_t r = 0; r < world; ++r) {
        auto all = inputOf(c, i, r, world);
        blocks.emplace_back(all.begin() + rank * c.count * elem, all.begin() + (rank + 1) * c.count * elem);
      }
      if (got.size() != c.count * elem) return "wrong size";
      std::string first;
      const size_t wrong = countWrong(c.dtype, c.op, blocks, got, c.count, &first);
      return wrong == 0 ? "" : std::to_string(wrong) + " wrong elements, first: " + first;
    }
    case Kind::kBarrier:
      return "";
  }
  return "unknown kind";
}

// Every peer runs every case in order (tag = case index), checked against its inputs or the reference.
void runCases(size_t world, const std::vector<Case>& cases, const CommConfig& config = smallSegments()) {
  LocalCluster cluster = startCluster(world, config);
  REQUIRE(cluster.peers.size() == world);
  std::vector<std::vector<std::string>> errors(world);
  // Quantized broadcasts and all-gathers: every peer ends with the same bits (the owner adopts).
  std::vector<std::vector<std::vector<uint8_t>>> held(cases.size(), std::vector<std::vector<uint8_t>>(world));
  cluster.onEach([&](size_t p) {
    Communicator& comm = *cluster.peers[p];
    const uint32_t rank = comm.topology().group_rank;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      auto got = runCase(comm, c, i, world);
      if (!got.isOk()) {
        errors[p].push_back(describe(c) + ": " + got.status().toString());
        continue;
      }
      if (c.quant == Quant::kNone) {
        const std::string wrong = check(c, i, rank, world, *got);
        if (!wrong.empty()) errors[p].push_back(describe(c) + " rank " + std::to_string(rank) + ": " + wrong);
      }
      held[i][rank] = std::move(got).value();
    }
  });
  for (size_t p = 0; p < world; ++p) {
    INFO("peer " << p);
    CHECK(errors[p].empty());
    for (size_t k = 0; k < errors[p].size() && k < 20; ++k) WARN(errors[p][k]);
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (c.kind != Kind::kBroadcast && c.kind != Kind::kAllGather) continue;
    INFO(describe(c));
    for (size_t r = 1; r < world; ++r) CHECK(held[i][r] == held[i][0]);
  }
}

std::vector<Case> sweep(size_t world, const std::vector<size_t>& counts) {
  std::vector<Case> cases;
  uint32_t root = 0;
  size_t k = 0;
  for (size_t count : counts) {
    ++k;  // so that a dtype meets both placements across the counts under a sanitizer
    for (DataType t : kAllTypes) {
      for (bool in_place : sweepPlacements(k++)) {
        cases.push_back(Case{Kind::kBroadcast, t, RedOp::kSum, count, in_place, root++ % static_cast<uint32_t>(world)});
        cases.push_back(Case{Kind::kAllGather, t, RedOp::kSum, count, in_place, 0});
        for (RedOp op : kAllOps) cases.push_back(Case{Kind::kReduceScatter, t, op, count, in_place, 0});
      }
    }
    cases.push_back(Case{Kind::kBarrier, DataType::kFloat32, RedOp::kSum, 0, false, 0});
  }
  return cases;
}

}  // namespace

TEST_CASE("collectives: 1 peer, broadcast/allgather/reducescatter/barrier, every dtype and op", "[collectives][sweep]") {
  runCases(1, sweep(1, {0, 1, 1001}));
}
TEST_CASE("collectives: 2 peers, broadcast/allgather/reducescatter/barrier, every dtype and op", "[collectives][sweep]") {
  runCases(2, sweep(2, {0, 1, 1001, 5003}));
}
TEST_CASE("collectives: 3 peers, broadcast/allgather/reducescatter/barrier, every dtype and op", "[collectives][sweep]") {
  runCases(3, sweep(3, {0, 1, 1001, 5003}));
}
TEST_CASE("collectives: 4 peers, broadcast/allgather/reducescatter/barrier, every dtype and op", "[collectives][sweep]") {
  runCases(4, sweep(4, {1, 333, 5003}));
}
TEST_CASE("collectives: 7 peers, broadcast/allgather/reducescatter/barrier, every dtype and op", "[collectives][sweep]") {
  runCases(7, sweep(7, {1, 3, 1001}));
}

TEST_CASE("collectives: quantized and compressed broadcast and allgather are bit-identical everywhere",
          "[collectives]") {
  std::vector<Case> cases;
  uint32_t root = 0;
  for (Quant q : {Quant::kNone, Quant::kFp16, Quant::kBf16, Quant::kInt8}) {
    for (int z : {0, 3}) {
      for (bool in_place : {false, true}) {
        cases.push_back(Case{Kind::kBroadcast, DataType::kFloat32, RedOp::kSum, 4099, in_place, root++ % 3, q, z});
        cases.push_back(Case{Kind::kAllGather, DataType::kFloat32, RedOp::kSum, 1501, in_place, 0, q, z});
      }
    }
  }
  runCases(3, cases);
}

TEST_CASE("collectives: quantized reduce-scatter stays close to the exact sum, compressed is exact", "[collectives]") {
  constexpr size_t kWorld = 3, kCount = 2001;
  LocalCluster cluster = startCluster(kWorld, smallSegments());
  REQUIRE(cluster.peers.size() == kWorld);
  const Quant quants[] = {Quant::kNone, Quant::kFp16, Quant::kBf16, Quant::kInt8};
  std::vector<std::vector<std::vector<float>>> got(4, std::vector<std::vector<float>>(kWorld));
  std::vector<std::string> errors(kWorld);
  cluster.onEach([&](size_t p) {
    Communicator& comm = *cluster.peers[p];
    const uint32_t rank = comm.topology().group_rank;
    for (size_t q = 0; q < 4; ++q) {
      std::vector<float> in = randomFloats(rank * 10 + q, kCount * kWorld);
      std::vector<float> out(kCount, -7.0f);
      ReduceOptions o;
      o.tag = q;
      o.quant = quants[q];
      o.compress = q == 0 ? 5 : 0;
      auto r = comm.reduceScatter(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum, o);
      if (!r.isOk()) errors[p] += r.status().toString() + "; ";
      got[q][rank] = out;
    }
  });
  for (size_t p = 0; p < kWorld; ++p) CHECK(errors[p].empty());
  for (size_t q = 0; q < 4; ++q) {
    INFO("quant " << static_cast<int>(quants[q]));
    std::vector<std::vector<float>> inputs;
    for (uint32_t r = 0; r < kWorld; ++r) inputs.push_back(randomFloats(r * 10 + q, kCount * kWorld));
    for (uint32_t rank = 0; rank < kWorld; ++rank) {
      double worst = 0;
      for (size_t k = 0; k < kCount; ++k) {
        double want = 0;
        for (uint32_t r = 0; r < kWorld; ++r) want += inputs[r][rank * kCount + k];
        worst = std::max(worst, std::abs(want - got[q][rank][k]));
      }
      // Exact up to float32 rounding unquantized; int8 blocks of values in [-1, 1], requantized at each hop.
      CHECK(worst < (q == 0 ? 1e-5 : q == 3 ? 0.1 : 0.05));
    }
  }
}

TEST_CASE("collectives: every collective concurrently with all-reduces, started in different orders",
          "[collectives]") {
  constexpr size_t kWorld = 4;
  LocalCluster cluster = startCluster(kWorld, smallSegments());
  REQUIRE(cluster.peers.size() == kWorld);
  std::vector<Case> cases;
  for (size_t i = 0; i < 12; ++i) {
    const Kind kind = static_cast<Kind>(i % 4);
    cases.push_back(Case{kind, kAllTypes[(i * 5) % 12], kAllOps[i % 5], kind == Kind::kBarrier ? 0 : 3000 + i * 101,
                         i % 3 == 0, static_cast<uint32_t>(i % kWorld)});
  }
  std::atomic<int> failures{0};
  cluster.onEach([&](size_t p) {
    Communicator& comm = *cluster.peers[p];
    const uint32_t rank = comm.topology().group_rank;
    // Every peer starts them in another order, on threads of their own, next to all-reduces (tags 100+).
    std::vector<std::future<std::string>> running;
    for (size_t k = 0; k < cases.size(); ++k) {
      const size_t i = (k + p * 5) % cases.size();
      running.push_back(std::async(std::launch::async, [&, i] {
        auto got = runCase(comm, cases[i], i, kWorld);
        if (!got.isOk()) return describe(cases[i]) + ": " + got.status().toString();
        return check(cases[i], i, rank, kWorld, *got);
      }));
      std::vector<float> buf(2000 + k, 1.0f);
      ReduceOptions o;
      o.tag = 100 + k;
      auto r = comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum, o);
      if (!r.isOk() || buf[0] != static_cast<float>(kWorld)) ++failures;
    }
    for (auto& f : running) {
      const std::string e = f.get();
      if (!e.empty()) {
        WARN(e);
        ++failures;
      }
    }
  });
  CHECK(failures == 0);
}

TEST_CASE("collectives: a different collective, root or count on one peer fails everyone with Mismatch",
          "[collectives]") {
  constexpr size_t kWorld = 3;
  LocalCluster cluster = startCluster(kWorld, smallSegments());
  REQUIRE(cluster.peers.size() == kWorld);
  std::vector<std::vector<Status>> st(kWorld);
  cluster.onEach([&](size_t p) {
    Communicator& comm = *cluster.peers[p];
    const bool odd = comm.topology().group_rank == 1;
    std::vector<float> a(3000, 1.0f), b(3000 * kWorld, 1.0f);
    ReduceOptions o;
    // 1: an all-gather against reduce-scatters with the same layout.
    o.tag = 1;
    st[p].push_back(odd ? comm.allGather(a.data(), b.data(), 3000, DataType::kFloat32, o).status()
                        : comm.reduceScatter(b.data(), a.data(), 3000, DataType::kFloat32, RedOp::kSum, o).status());
    // 2: broadcasts from different roots.
    o.tag = 2;
    st[p].push_back(comm.broadcast(a.data(), a.data(), 3000, DataType::kFloat32, odd ? 1 : 0, o).status());
    // 3: a broadcast against all-reduces.
    o.tag = 3;
    st[p].push_back(odd ? comm.broadcast(a.data(), a.data(), 3000, DataType::kFloat32, 0, o).status()
                        : comm.allReduce(a.data(), a.data(), 3000, DataType::kFloat32, RedOp::kSum, o).status());
    // 4: all-gathers of different counts.
    o.tag = 4;
    st[p].push_back(comm.allGather(a.data(), b.data(), odd ? 2999 : 3000, DataType::kFloat32, o).status());
    // 5: the ring is still up: a matching barrier and all-gather work.
    o.tag = 5;
    st[p].push_back(comm.barrier(o).status());
    o.tag = 6;
    st[p].push_back(comm.allGather(a.data(), b.data(), 3000, DataType::kFloat32, o).status());
  });
  const char* expect[] = {"allgather", "root=", "broadcast", "count="};
  for (size_t p = 0; p < kWorld; ++p) {
    for (size_t k = 0; k < 4; ++k) {
      INFO("peer " << p << " call " << k << ": " << st[p][k].toString());
      CHECK(st[p][k].code() == Code::kMismatch);
      CHECK_THAT(st[p][k].message(), Catch::Contains(expect[k]));
    }
    CHECK(st[p][4].isOk());
    CHECK(st[p][5].isOk());
  }
}

TEST_CASE("collectives: bad arguments are refused before anything is sent", "[collectives]") {
  constexpr size_t kWorld = 2;
  LocalCluster cluster = startCluster(kWorld, smallSegments());
  REQUIRE(cluster.peers.size() == kWorld);
  Communicator& c = *cluster.peers[0];
  const uint32_t rank = c.topology().group_rank;
  std::vector<float> a(100, 1.0f), b(200, 1.0f);
  auto code = [](const Result<ReduceInfo>& r) { return r.status().code(); };
  CHECK(code(c.broadcast(a.data(), a.data(), 100, DataType::kFloat32, 2)) == Code::kInvalidArgument);
  CHECK_THAT(c.broadcast(a.data(), a.data(), 100, DataType::kFloat32, 7).status().message(),
             Catch::Contains("root 7"));
  CHECK(code(c.broadcast(a.data(), nullptr, 100, DataType::kFloat32, 0)) == Code::kInvalidArgument);
  CHECK(code(c.broadcast(nullptr, a.data(), 100, DataType::kFloat32, rank)) == Code::kInvalidArgument);
  // All-gather: send inside recv but not this rank's block; reduce-scatter likewise.
  CHECK(code(c.allGather(b.data() + (1 - rank) * 100, b.data(), 100, DataType::kFloat32)) == Code::kInvalidArgument);
  CHECK(code(c.allGather(b.data() + 1, b.data(), 100, DataType::kFloat32)) == Code::kInvalidArgument);
  CHECK(code(c.reduceScatter(b.data(), b.data() + (1 - rank) * 100, 100, DataType::kFloat32, RedOp::kSum)) ==
        Code::kInvalidArgument);
  CHECK(code(c.reduceScatter(b.data(), nullptr, 100, DataType::kFloat32, RedOp::kSum)) == Code::kInvalidArgument);
  CHECK(code(c.reduceScatter(b.data(), a.data(), 100, static_cast<DataType>(99), RedOp::kSum)) ==
        Code::kInvalidArgument);
  CHECK(code(c.reduceScatter(b.data(), a.data(), 100, DataType::kFloat32, static_cast<RedOp>(42))) ==
        Code::kInvalidArgument);
  ReduceOptions q;
  q.quant = Quant::kInt8;
  CHECK(code(c.allGather(a.data(), b.data(), 100, DataType::kInt32, q)) == Code::kInvalidArgument);
  // Device buffers need a GPU backend module; this binary has none beside it (test_device_collectives.cpp
  // loads the host one).
  ReduceOptions device;
  device.location = BufferLocation::kDevice;
  auto no_gpu = c.allGather(a.data(), b.data(), 100, DataType::kFloat32, device);
  CHECK(no_gpu.status().code() == Code::kUnsupported);
  CHECK_THAT(no_gpu.status().message(), Catch::Contains("GPU backend"));
  // None of that started anything: a matching call still works on both.
  std::vector<Status> st(kWorld);
  cluster.onEach([&](size_t p) {
    std::vector<float> x(50, static_cast<float>(cluster.peers[p]->topology().group_rank + 1)), y(100, 0.0f);
    st[p] = cluster.peers[p]->allGather(x.data(), y.data(), 50, DataType::kFloat32).status();
    if (st[p].isOk() && (y[0] != 1.0f || y[99] != 2.0f)) st[p] = Status::internal("wrong all-gather");
  });
  for (const auto& s : st) CHECK(s.isOk());
  // Not connected: InvalidUsage.
  auto alone = makeComm(smallSegments());
  REQUIRE(alone);
  CHECK(code(alone->barrier()) == Code::kInvalidUsage);
  CHECK(code(alone->allGather(a.data(), b.data(), 100, DataType::kFloat32)) == Code::kInvalidUsage);
}

TEST_CASE("collectives: a broadcast and a barrier nobody else joins end with Timeout, buffers intact", "[collectives]") {
  CommConfig cfg = smallSegments();
  cfg.op_timeout_ms = 500;
  LocalCluster cluster = startCluster(2, cfg);
  REQUIRE(cluster.peers.size() == 2);
  Communicator& lone = *cluster.peers[0];
  const uint32_t other = 1 - lone.topology().group_rank;
  std::vector<float> a(3000, 7.0f);
  auto r = lone.broadcast(a.data(), a.data(), a.size(), DataType::kFloat32, other);
  CHECK(r.status().code() == Code::kTimeout);
  CHECK(a == std::vector<float>(3000, 7.0f));
  ReduceOptions o;
  o.tag = 1;
  CHECK(lone.barrier(o).status().code() == Code::kTimeout);
  // Both peers can still work together afterwards (tags 2 and 3: the others failed on their first call).
  std::vector<Status> st(2);
  cluster.onEach([&](size_t p) {
    Communicator& c = *cluster.peers[p];
    ReduceOptions t;
    t.tag = 2;
    st[p] = c.barrier(t).status();
    if (!st[p].isOk()) return;
    std::vector<float> x(10, static_cast<float>(c.topology().group_rank)), y(20, -1.0f);
    t.tag = 3;
    st[p] = c.allGather(x.data(), y.data(), 10, DataType::kFloat32, t).status();
    if (st[p].isOk() && (y[0] != 0.0f || y[19] != 1.0f)) st[p] = Status::internal("wrong all-gather");
  });
  CHECK(st[0].isOk());
  CHECK(st[1].isOk());
}
