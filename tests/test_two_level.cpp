// Two-level all-reduces (docs/algorithms.md §12) on real rings in this process: peers declare regions
// and ask for "hierarchical"; large all-reduces then run inside each region and across regions. The
// results equal the flat ring's (exactly for integers, within rounding for floats), bit-identical on
// every peer, for equal and unequal regions, one-member regions, every op, quantized, by concurrent
// tags; the master logs its choice, and "flat" and one-region runs stay flat.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

CommConfig regionConfig(const std::string& region, const std::string& algorithm) {
  CommConfig c = fastCommConfig(0);
  c.region = region;
  c.algorithm = algorithm;
  c.gather_bytes = 0;      // every size on the ring (or in two levels): small ones exercise many pieces
  c.segment_bytes = 1024;  // many segments per piece
  c.op_timeout_ms = 60000;
  return c;
}

// `gather_bytes`: 0 runs every size on the ring or in two levels; the largest (wire::kEagerBytes)
// gathers every call that can (§12a).
LocalCluster regionCluster(const std::vector<std::string>& regions, const std::string& algorithm = "hierarchical",
                           int64_t gather_bytes = 0) {
  std::vector<CommConfig> configs;
  for (const auto& r : regions) {
    configs.push_back(regionConfig(r, algorithm));
    configs.back().gather_bytes = gather_bytes;
  }
  return startCluster(configs);
}

// One member per region name, in two levels, with 1 MiB segments (frames a same-host successor reads
// from the sender's memory, net/lending.hpp), for calls of tens of MiB: five members in one process
// share its address space and two cores, so a peer's heartbeats may wait longer than the short
// timeout of the other cases (these cases check results, not failure detection).
LocalCluster megabyteCluster(const std::vector<std::string>& regions) {
  constexpr uint32_t kPatientMs = 20000;
  std::vector<CommConfig> configs;
  for (const auto& r : regions) {
    configs.push_back(regionConfig(r, "hierarchical"));
    configs.back().segment_bytes = 1u << 20;
    configs.back().peer_timeout_ms = kPatientMs;
  }
  MasterConfig master = fastMasterConfig();
  master.peer_timeout_ms = kPatientMs;
  return startCluster(configs, master);
}

// Every peer all-reduces `count` elements of input(rank, i); returns each peer's output and info.
template <typename T>
std::vector<std::vector<T>> allReduceAll(LocalCluster& c, size_t count, DataType dtype, RedOp op,
                                         const std::function<T(size_t, size_t)>& input,
                                         std::vector<ReduceInfo>* infos = nullptr, Quant quant = Quant::kNone) {
  const size_t n = c.peers.size();
  std::vector<std::vector<T>> out(n, std::vector<T>(count));
  std::vector<Status> st(n);
  std::vector<ReduceInfo> info(n);
  c.onEach([&](size_t r) {
    std::vector<T> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = input(r, i);
    ReduceOptions o;
    o.quant = quant;
    auto res = c.peers[r]->allReduce(in.data(), out[r].data(), count, dtype, op, o);
    st[r] = res.status();
    if (res.isOk()) info[r] = *res;
  });
  for (size_t r = 0; r < n; ++r) {
    INFO("peer " << r);
    REQUIRE(st[r].isOk());
  }
  if (infos != nullptr) *infos = info;
  return out;
}

template <typename T>
void checkIdentical(const std::vector<std::vector<T>>& out) {
  for (size_t r = 1; r < out.size(); ++r) {
    INFO("peer " << r);
    CHECK(std::memcmp(out[r].data(), out[0].data(), out[0].size() * sizeof(T)) == 0);
  }
}

const std::vector<std::string> kUnequal = {"a", "b", "c", "a", "b", "a", "c", "b", "a"};  // 4 + 3 + 2

// On every peer of `c`, an all-gather of `block` elements per member and a reduce-scatter of the
// group's layout, both in two levels: the all-gather's block of group rank q is f(q, i), peer r's
// reduce-scatter input is f(r, i) over the whole layout. Checks every element exactly.
template <typename T, typename F>
void gatherScatterExact(LocalCluster& c, size_t block, DataType dtype, bool in_place, F f) {
  const size_t n = c.peers.size();
  std::vector<size_t> g(n);  // each peer's group rank: its block's place
  for (size_t r = 0; r < n; ++r) g[r] = c.peers[r]->topology().group_rank;
  std::vector<std::vector<T>> gathered(n, std::vector<T>(n * block, T(-1)));
  std::vector<std::vector<T>> scattered(n, std::vector<T>(block, T(-1)));
  std::vector<Status> st(2 * n);
  std::vector<ReduceInfo> info(2 * n);
  c.onEach([&](size_t r) {
    std::vector<T> own(block);
    for (size_t i = 0; i < block; ++i) own[i] = f(g[r], i);
    T* at = gathered[r].data() + g[r] * block;
    if (in_place) std::copy(own.begin(), own.end(), at);
    auto ag = c.peers[r]->allGather(in_place ? at : own.data(), gathered[r].data(), block, dtype);
    st[r] = ag.status();
    if (ag.isOk()) info[r] = *ag;
    std::vector<T> all(n * block);
    for (size_t i = 0; i < all.size(); ++i) all[i] = f(r, i);
    T* out = in_place ? all.data() + g[r] * block : scattered[r].data();
    auto rs = c.peers[r]->reduceScatter(all.data(), out, block, dtype, RedOp::kSum);
    st[n + r] = rs.status();
    if (rs.isOk()) info[n + r] = *rs;
    if (in_place) std::copy(out, out + block, scattered[r].begin());
  });
  for (size_t r = 0; r < n; ++r) {
    INFO("peer " << r << ": " << st[r].message() << " / " << st[n + r].message());
    REQUIRE(st[r].isOk());
    REQUIRE(st[n + r].isOk());
    CHECK(info[r].hierarchical);
    CHECK(info[n + r].hierarchical);
    size_t wrong = 0;
    for (size_t b = 0; b < n; ++b) {
      for (size_t i = 0; i < block; ++i) wrong += gathered[r][b * block + i] != f(b, i);
    }
    CHECK(wrong == 0);
    for (size_t i = 0; i < block; ++i) {
      double want = 0;
      for (size_t q = 0; q < n; ++q) want += static_cast<double>(f(q, g[r] * block + i));
      wrong += scattered[r][i] != static_cast<T>(want);  // exact: the test's values sum exactly
    }
    CHECK(wrong == 0);
  }
}

}  // namespace

TEST_CASE("two-level: 4 + 3 + 2 peers, every size, float sum and avg within rounding of the exact value, "
          "bit-identical on every peer, int32 exact",
          "[two-level]") {
  LocalCluster c = regionCluster(kUnequal);
  REQUIRE(c.peers.size() == kUnequal.size());
  for (const auto& p : c.peers) CHECK(p->topology().hierarchical);
  const size_t n = c.peers.size();
  for (size_t count : {1, 2, 9, 37, 1000, 20011}) {
    INFO("count " << count);
    std::vector<ReduceInfo> infos;
    auto f = [](size_t r, size_t i) { return static_cast<float>((r * 31 + i * 7) % 101) / 8.0f; };
    auto sum = allReduceAll<float>(c, count, DataType::kFloat32, RedOp::kSum, f, &infos);
    checkIdentical(sum);
    for (const auto& info : infos) {
      CHECK(info.hierarchical);
      CHECK_FALSE(info.gathered);
    }
    for (size_t i = 0; i < count; ++i) {
      double want = 0;
      for (size_t r = 0; r < n; ++r) want += f(r, i);
      CHECK(sum[0][i] == Approx(want).epsilon(1e-5));  // eighths: exact in float, any order
    }
    auto avg = allReduceAll<float>(c, count, DataType::kFloat32, RedOp::kAvg, f);
    checkIdentical(avg);
    for (size_t i = 0; i < count; i += 7) {
      double want = 0;
      for (size_t r = 0; r < n; ++r) want += f(r, i);
      CHECK(avg[0][i] == Approx(want / static_cast<double>(n)).epsilon(1e-5));
    }
    auto ints = allReduceAll<int32_t>(c, count, DataType::kInt32, RedOp::kSum,
                                      [](size_t r, size_t i) { return static_cast<int32_t>(r * 1000 + i) - 500; });
    for (size_t i = 0; i < count; ++i) {
      int64_t want = 0;
      for (size_t r = 0; r < n; ++r) want += static_cast<int64_t>(r * 1000 + i) - 500;
      CHECK(ints[0][i] == want);
    }
    checkIdentical(ints);
  }
}

TEST_CASE("two-level: max, min, prod and every dtype, against the flat ring's results", "[two-level]") {
  // Equal regions and a one-member region.
  for (const auto& regions : std::vector<std::vector<std::string>>{{"x", "x", "x", "y", "y", "y"},
                                                                  {"x", "solo", "x", "x"}}) {
    LocalCluster two = regionCluster(regions);
    REQUIRE(two.peers.size() == regions.size());
    const size_t count = 777;
    auto in = [](size_t r, size_t i) { return static_cast<double>(((r + 3) * (i + 1)) % 17) - 8.0; };
    for (RedOp op : {RedOp::kMax, RedOp::kMin, RedOp::kSum, RedOp::kProd}) {
      INFO("op " << static_cast<int>(op));
      std::vector<ReduceInfo> infos;
      auto d = allReduceAll<double>(two, count, DataType::kFloat64, op, in, &infos);
      CHECK(infos[0].hierarchical);
      checkIdentical(d);
      for (size_t i = 0; i < count; ++i) {
        double want = in(0, i);
        for (size_t r = 1; r < regions.size(); ++r) {
          const double x = in(r, i);
          want = op == RedOp::kMax ? std::max(want, x) : op == RedOp::kMin ? std::min(want, x)
                 : op == RedOp::kSum ? want + x : want * x;  // small integers: exact in any order
        }
        CHECK(d[0][i] == want);
      }
      auto i64 = allReduceAll<int64_t>(two, count, DataType::kInt64, op,
                                       [&](size_t r, size_t i) { return static_cast<int64_t>(in(r, i)); });
      checkIdentical(i64);
      CHECK(static_cast<double>(i64[0][5]) == d[0][5]);
    }
    // Integer avg keeps the flat ring (its exact partial sums): still right, and says so.
    std::vector<ReduceInfo> infos;
    auto iavg = allReduceAll<int32_t>(two, count, DataType::kInt32, RedOp::kAvg,
                                      [](size_t r, size_t) { return static_cast<int32_t>(r) * 4; }, &infos);
    CHECK_FALSE(infos[0].hierarchical);
    checkIdentical(iavg);
  }
}

TEST_CASE("two-level: small calls gather in each region and between the region leaders: every op and dtype, "
          "int8, bit-identical on every peer, and larger calls and integer avg do not",
          "[two-level]") {
  for (const auto& regions : std::vector<std::vector<std::string>>{kUnequal, {"x", "solo", "x", "x"}}) {
    LocalCluster c = regionCluster(regions, "hierarchical", 4 << 20);
    const size_t n = regions.size();
    REQUIRE(c.peers.size() == n);
    REQUIRE(c.peers[0]->topology().hierarchical);
    auto f = [](size_t r, size_t i) { return static_cast<float>((r * 31 + i * 7) % 101) / 8.0f; };
    for (size_t count : {1, 9, 1000, 20011}) {
      INFO("count " << count);
      std::vector<ReduceInfo> infos;
      auto sum = allReduceAll<float>(c, count, DataType::kFloat32, RedOp::kSum, f, &infos);
      checkIdentical(sum);
      for (const auto& info : infos) {
        CHECK(info.hierarchical);
        CHECK(info.gathered);
      }
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        for (size_t r = 0; r < n; ++r) want += f(r, i);
        CHECK(sum[0][i] == Approx(want).epsilon(1e-5));
      }
      auto avg = allReduceAll<float>(c, count, DataType::kFloat32, RedOp::kAvg, f);
      checkIdentical(avg);
      double want = 0;
      for (size_t r = 0; r < n; ++r) want += f(r, count - 1);
      CHECK(avg[0][count - 1] == Approx(want / static_cast<double>(n)).epsilon(1e-5));
      auto q = allReduceAll<float>(c, count, DataType::kFloat32, RedOp::kSum, f, nullptr, Quant::kInt8);
      checkIdentical(q);
      CHECK(std::fabs(q[0][count - 1] - want) < 0.1 * static_cast<double>(n));
    }
    auto in = [](size_t r, size_t i) { return static_cast<double>(((r + 3) * (i + 1)) % 17) - 8.0; };
    for (RedOp op : {RedOp::kMax, RedOp::kMin, RedOp::kProd}) {
      INFO("op " << static_cast<int>(op));
      auto d = allReduceAll<double>(c, 333, DataType::kFloat64, op, in);
      checkIdentical(d);
      auto i64 = allReduceAll<int64_t>(c, 333, DataType::kInt64, op,
                                       [&](size_t r, size_t i) { return static_cast<int64_t>(in(r, i)); });
      checkIdentical(i64);
      for (size_t i = 0; i < 333; i += 11) {
        double want = in(0, i);
        for (size_t r = 1; r < n; ++r) {
          const double x = in(r, i);
          want = op == RedOp::kMax ? std::max(want, x) : op == RedOp::kMin ? std::min(want, x) : want * x;
        }
        CHECK(d[0][i] == want);
        CHECK(static_cast<double>(i64[0][i]) == want);
      }
    }
    std::vector<ReduceInfo> infos;
    allReduceAll<int32_t>(c, 100, DataType::kInt32, RedOp::kAvg, [](size_t r, size_t) { return static_cast<int32_t>(r); },
                          &infos);
    CHECK(infos[0].gathered);  // on the flat ring: integer avg's exact partial sums are its alone
    CHECK_FALSE(infos[0].hierarchical);
    // Beyond the eager limit: the large two-level path.
    allReduceAll<float>(c, (4u << 20) / sizeof(float), DataType::kFloat32, RedOp::kSum, f, &infos);
    CHECK(infos[0].hierarchical);
    CHECK_FALSE(infos[0].gathered);
  }
}

TEST_CASE("two-level: broadcasts from a root in every region arrive bit for bit, in and out of place",
          "[two-level]") {
  LocalCluster c = regionCluster(kUnequal);
  const size_t n = kUnequal.size();
  REQUIRE(c.peers.size() == n);
  for (size_t count : {1, 9, 20011}) {
    for (uint32_t root = 0; root < n; ++root) {
      INFO("count " << count << " root " << root);
      std::vector<std::vector<float>> out(n, std::vector<float>(count));
      std::vector<Status> st(n);
      std::vector<ReduceInfo> info(n);
      const bool in_place = root % 2 == 0;
      c.onEach([&](size_t r) {
        const size_t g = c.peers[r]->topology().group_rank;  // the root is a group rank
        std::vector<float> in(count);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(g * 100000 + i) * 0.5f;
        if (in_place) out[r] = in;
        auto res = c.peers[r]->broadcast(in_place ? out[r].data() : in.data(), out[r].data(), count,
                                         DataType::kFloat32, root);
        st[r] = res.status();
        if (res.isOk()) info[r] = *res;
      });
      for (size_t r = 0; r < n; ++r) {
        INFO("peer " << r);
        REQUIRE(st[r].isOk());
        CHECK(info[r].hierarchical);
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += out[r][i] != static_cast<float>(root * 100000 + i) * 0.5f;
        CHECK(wrong == 0);
      }
    }
  }
  // 20 MiB: three waves; two (9 MiB) under a sanitizer, where the waves test covers the third.
  const size_t big = ((kSanitized ? 9u : 20u) << 20) / sizeof(int32_t) + 5;
  std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(big));
  std::vector<Status> st(n);
  c.onEach([&](size_t r) {
    const bool root = c.peers[r]->topology().group_rank == 7;
    for (size_t i = 0; i < big; ++i) out[r][i] = root ? static_cast<int32_t>(i * 3) : -1;
    st[r] = c.peers[r]->broadcast(out[r].data(), out[r].data(), big, DataType::kInt32, 7).status();
  });
  for (size_t r = 0; r < n; ++r) {
    REQUIRE(st[r].isOk());
    size_t wrong = 0;
    for (size_t i = 0; i < big; ++i) wrong += out[r][i] != static_cast<int32_t>(i * 3);
    CHECK(wrong == 0);
  }
}

TEST_CASE("two-level: all-gathers and reduce-scatters, ring sorted by region or not, in and out of place, exact",
          "[two-level]") {
  // kUnequal interleaves the regions in ring order (the levels work in a sorted scratch); the second
  // ring is sorted by region (they work in the caller's buffers), with a one-member region.
  for (const auto& regions : std::vector<std::vector<std::string>>{kUnequal, {"x", "x", "x", "y", "y", "solo"}}) {
    LocalCluster c = regionCluster(regions);
    const size_t n = regions.size();
    REQUIRE(c.peers.size() == n);
    std::vector<size_t> g(n);  // each peer's group rank: its block's place
    for (size_t r = 0; r < n; ++r) g[r] = c.peers[r]->topology().group_rank;
    for (size_t block : {1, 7, 5000}) {
      for (bool in_place : {false, true}) {
        INFO("block " << block << (in_place ? " in place" : ""));
        // Eighths: exact in any order.
        gatherScatterExact<float>(c, block, DataType::kFloat32, in_place,
                                  [](size_t r, size_t i) { return static_cast<float>(r * 1000 + i) / 8.0f; });
      }
    }
    // avg, int32 and zstd on the WAN level.
    const size_t block = 3001;
    std::vector<std::vector<int32_t>> ints(n, std::vector<int32_t>(block));
    std::vector<std::vector<double>> avgs(n, std::vector<double>(block));
    std::vector<Status> st(2 * n);
    c.onEach([&](size_t r) {
      std::vector<int32_t> in(n * block);
      std::vector<double> din(n * block);
      for (size_t i = 0; i < in.size(); ++i) {
        in[i] = static_cast<int32_t>((r * 7 + i) % 1000) - 300;
        din[i] = static_cast<double>(in[i]);
      }
      ReduceOptions z;
      z.compress = 1;
      st[r] = c.peers[r]->reduceScatter(in.data(), ints[r].data(), block, DataType::kInt32, RedOp::kSum, z).status();
      st[n + r] = c.peers[r]->reduceScatter(din.data(), avgs[r].data(), block, DataType::kFloat64, RedOp::kAvg).status();
    });
    for (size_t r = 0; r < n; ++r) {
      REQUIRE(st[r].isOk());
      REQUIRE(st[n + r].isOk());
      size_t wrong = 0;
      for (size_t i = 0; i < block; ++i) {
        int64_t want = 0;
        for (size_t q = 0; q < n; ++q) want += static_cast<int64_t>((q * 7 + g[r] * block + i) % 1000) - 300;
        wrong += ints[r][i] != want;
        wrong += std::fabs(avgs[r][i] - static_cast<double>(want) / static_cast<double>(n)) > 1e-9;
      }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("two-level: quantized int8 on the WAN level is bit-identical on every peer and within int8's error",
          "[two-level]") {
  LocalCluster c = regionCluster(kUnequal);
  REQUIRE(c.peers.size() == kUnequal.size());
  const size_t count = 5000;
  auto f = [](size_t r, size_t i) { return std::sin(static_cast<float>(r * 13 + i) * 0.01f); };
  std::vector<ReduceInfo> infos;
  auto q = allReduceAll<float>(c, count, DataType::kFloat32, RedOp::kSum, f, &infos, Quant::kInt8);
  CHECK(infos[0].hierarchical);
  checkIdentical(q);
  for (size_t i = 0; i < count; i += 13) {
    double want = 0;
    for (size_t r = 0; r < c.peers.size(); ++r) want += f(r, i);
    CHECK(std::fabs(q[0][i] - want) < 0.1 * c.peers.size());
  }
}

TEST_CASE("two-level: concurrent tags run side by side", "[two-level]") {
  LocalCluster c = regionCluster({"a", "a", "b", "b", "b"});
  REQUIRE(c.peers.size() == 5);
  const size_t count = 3001;
  std::vector<std::vector<std::vector<float>>> out(4, std::vector<std::vector<float>>(5));
  std::vector<Status> st(20);
  c.onEach([&](size_t r) {
    std::vector<std::vector<float>> in(4, std::vector<float>(count));
    std::vector<ReduceHandle> handles;
    for (uint64_t tag = 0; tag < 4; ++tag) {
      for (size_t i = 0; i < count; ++i) in[tag][i] = static_cast<float>(r + tag * 10 + i % 3);
      out[tag][r].assign(count, 0.0f);
      ReduceOptions o;
      o.tag = tag;
      auto h = c.peers[r]->allReduceAsync(in[tag].data(), out[tag][r].data(), count, DataType::kFloat32, RedOp::kSum, o);
      REQUIRE(h.isOk());
      handles.push_back(*h);
    }
    for (size_t t = 0; t < handles.size(); ++t) st[r * 4 + t] = handles[t].wait().status();
  });
  for (const auto& s : st) CHECK(s.isOk());
  for (uint64_t tag = 0; tag < 4; ++tag) {
    checkIdentical(out[tag]);
    CHECK(out[tag][0][4] == static_cast<float>(0 + 1 + 2 + 3 + 4 + 5 * (tag * 10 + 1)));
  }
}

TEST_CASE("two-level: flat when asked, and with one region or one peer per region", "[two-level]") {
  for (const auto& [regions, algorithm] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{{{"a", "a", "b", "b"}, "flat"},
                                                                    {{"a", "a", "a", "a"}, "hierarchical"},
                                                                    {{"a", "b", "c", "d"}, "hierarchical"}}) {
    LocalCluster c = regionCluster(regions, algorithm);
    REQUIRE(c.peers.size() == regions.size());
    CHECK_FALSE(c.peers[0]->topology().hierarchical);
    std::vector<ReduceInfo> infos;
    auto out = allReduceAll<float>(c, 4096, DataType::kFloat32, RedOp::kSum,
                                   [](size_t r, size_t) { return static_cast<float>(r); }, &infos);
    CHECK_FALSE(infos[0].hierarchical);
    CHECK(out[0][100] == 6.0f);
  }
}

TEST_CASE("two-level: the master decides again when a departure and a join change the regions", "[two-level]") {
  LocalCluster c = regionCluster({"a", "a", "b"});
  REQUIRE(c.peers.size() == 3);
  auto check = [&](bool hierarchical, float want) {
    for (const auto& p : c.peers) CHECK(p->topology().hierarchical == hierarchical);
    std::vector<ReduceInfo> infos;
    auto out = allReduceAll<float>(c, 9000, DataType::kFloat32, RedOp::kSum,
                                   [](size_t, size_t i) { return static_cast<float>(i % 4); }, &infos);
    checkIdentical(out);
    CHECK(infos[0].hierarchical == hierarchical);
    CHECK(out[0][3] == 3.0f * want);
  };
  check(true, 3.0f);
  // An "a" peer leaves: a and b have one member each, nothing to gain from two levels.
  REQUIRE(c.peers[1]->leave().isOk());
  c.peers.erase(c.peers.begin() + 1);
  REQUIRE(c.updateAll());
  check(false, 2.0f);
  // A "b" peer joins: b has two members again.
  CommConfig nc = regionConfig("b", "hierarchical");
  nc.master_address = "127.0.0.1:" + std::to_string(c.master->port());
  c.peers.push_back(makeComm(nc));
  REQUIRE(c.peers.back());
  auto joining = std::async(std::launch::async, [&] { return c.peers.back()->connect(); });
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 10000));
  std::vector<Status> st(2);
  std::vector<std::thread> votes;
  for (size_t i = 0; i < 2; ++i) votes.emplace_back([&, i] { st[i] = c.peers[i]->updateTopology(); });
  for (auto& t : votes) t.join();
  REQUIRE(st[0].isOk());
  REQUIRE(st[1].isOk());
  REQUIRE(joining.get().isOk());
  check(true, 3.0f);
}

// [sweep]: whole (64 MiB) in the release build, reduced under the sanitizers (tests/CMakeLists.txt).
TEST_CASE("two-level: a call above 8 MiB runs in waves, exact and bit-identical", "[two-level][sweep]") {
  // 64 MiB of int32: eight waves (docs/algorithms.md §12), under a sanitizer 20 MiB, three; a
  // one-member region among them. Segments of 1 MiB (the default): same-host successors read the
  // frames from the sender's memory (lending), which the 1 KiB segments of the other cases never do,
  // and every wave's parts are lent from the call's few buffers.
  LocalCluster c = megabyteCluster({"a", "b", "a", "b", "solo"});
  REQUIRE(c.peers.size() == 5);
  const size_t count = (kSanitized ? (20u << 20) : (64u << 20)) / sizeof(int32_t) + 3;
  std::vector<ReduceInfo> infos;
  auto out = allReduceAll<int32_t>(c, count, DataType::kInt32, RedOp::kSum,
                                   [](size_t r, size_t i) { return static_cast<int32_t>((i * 7 + r) % 1000); }, &infos);
  CHECK(infos[0].hierarchical);
  uint64_t lent = 0;
  for (const auto& p : c.peers) lent += p->stats().same_host_read_bytes;
  CHECK(lent > 0);
  checkIdentical(out);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (size_t r = 0; r < 5; ++r) want += static_cast<int32_t>((i * 7 + r) % 1000);
    wrong += out[0][i] != want;
  }
  CHECK(wrong == 0);
}

TEST_CASE("two-level: an all-gather and a reduce-scatter above 8 MiB, exact, in and out of place",
          "[two-level][sweep]") {
  // A 64 MiB int32 layout: eight waves of every member's block (docs/algorithms.md §12c), on a ring
  // that interleaves the regions (the waves work in a wave-major scratch) with a one-member region.
  // Under a sanitizer 9 MiB, two waves. Segments of 1 MiB (the default), not the 1 KiB of the other
  // cases: with thousands of 1 KiB frames per level, five instrumented peers in one process starved
  // each other's heartbeats under TSan with two CPU hogs beside them; and patient timeouts.
  LocalCluster c = megabyteCluster({"a", "b", "a", "b", "solo"});
  REQUIRE(c.peers.size() == 5);
  const size_t layout = kSanitized ? (9u << 20) : (64u << 20);
  const size_t block = layout / sizeof(int32_t) / 5 + 3;
  for (bool in_place : sweepPlacements(1)) {  // under a sanitizer in place only
    INFO((in_place ? "in place" : "out of place"));
    gatherScatterExact<int32_t>(c, block, DataType::kInt32, in_place,
                                [](size_t r, size_t i) { return static_cast<int32_t>((i * 7 + r * 13) % 1000); });
  }
  uint64_t lent = 0;
  for (const auto& p : c.peers) lent += p->stats().same_host_read_bytes;
  CHECK(lent > 0);  // the waves' frames were read from the senders' memory
}

TEST_CASE("two-level: a member accepting more connections at once than the listener's base bound builds its ring",
          "[two-level]") {
  // K = 48: the first "b" member accepts 48 from its ring predecessor and 48 on the link from the
  // first "a" member, all in their handshakes at once (the listener's base bound is 64).
  std::vector<CommConfig> configs;
  for (const char* r : {"a", "a", "a", "b", "b", "b"}) {
    CommConfig cfg = regionConfig(r, "hierarchical");
    cfg.connections_per_peer = 48;
    configs.push_back(cfg);
  }
  LocalCluster c = startCluster(configs);
  REQUIRE(c.peers.size() == 6);
  CHECK(c.peers[0]->topology().hierarchical);
  auto out = allReduceAll<float>(c, 100000, DataType::kFloat32, RedOp::kSum,
                                 [](size_t r, size_t) { return static_cast<float>(r); });
  checkIdentical(out);
  CHECK(out[0][99999] == 15.0f);
}
