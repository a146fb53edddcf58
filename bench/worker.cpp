// One rank of pccl-bench: joins the pccl run, sets up Gloo in the same process when asked, runs every
// size on every backend, checks every result, and (on ring rank 0) prints the rows and writes JSON.
// Per-rank timings are combined with pccl all-reduces: the row's time is the median over iterations
// of the slowest rank. With PCCL_WANEM_PHASES set (pccl-wanem sets it), every rank appends one line
// per timed operation to that file, so the emulator can judge each row's timed phases on their own.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>

#include "bench.hpp"
#include "collective_kind.hpp"
#include "device_memory.hpp"
#include "gloo_backend.hpp"
#include "phase_log.hpp"
#include "pccl/communicator.hpp"
#include "tcp_store.hpp"
#include "worker.hpp"

namespace pccl::bench {

namespace {

constexpr uint64_t kControlTag = 1ull << 62;  // the bench's own bookkeeping all-reduces
constexpr uint64_t kBarrierTag = kControlTag + 1;

using Clock = std::chrono::steady_clock;

struct Row {
  std::string backend, algorithm;
  size_t bytes = 0;
  std::vector<double> times;  // this rank's, per timed iteration
  uint64_t wrong = 0;
  double max_err = 0;         // quantized runs: largest |result - float64 reference|
  uint64_t hash_mismatches = 0;  // pccl: iterations whose results were not bit-identical on every rank
  uint64_t rx_bytes = 0;         // --sync: bytes the stale rank received, over all iterations
  size_t index = 0;              // the row's place in the run (and in the JSON "results"), same on every rank
};

class Worker {
 public:
  explicit Worker(const Options& o) : o_(o) {}
  int run();

 private:
  bool join();
  bool describeRing();  // --optimize-topology's measurement, and the ring every row runs on
  bool setUpGloo();
  bool runPccl(size_t bytes, Row* row);
  bool runSync(size_t bytes, Row* row);
  bool setUpDevice(size_t max_bytes);
  bool runGloo(const std::string& algorithm, size_t bytes, Row* row);
  std::vector<std::string> glooAlgorithms() const;
  bool report(Row& row);
  bool lineUp();
  void progress(const Row& row, int done, double seconds);
  bool control(void* data, size_t count, DataType t, RedOp op);
  // Quantized or compressed runs use pseudo-random floats (the small integers of exact runs would
  // flatter zstd) and check results against the documented bound instead of bit for bit.
  bool quantized() const { return !o_.sync && (o_.quant != "none" || o_.compress != 0); }
  // Adds the wrong elements of `got` (count elements) to the row.
  void check(const uint8_t* got, size_t count, const std::string& backend, Row* row);
  bool checkIdentical(const uint8_t* got, size_t bytes, Row* row);
  void fail(const std::string& what) { std::fprintf(stderr, "pccl-bench rank %d: %s\n", rank_, what.c_str()); }

  Options o_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<StoreServer> store_;
  std::unique_ptr<GlooBackend> gloo_;
  DataType dtype_ = DataType::kFloat32;
  CollectiveKind kind_ = CollectiveKind::kAllReduce;
  size_t elem_ = 4;
  int rank_ = -1, world_ = 0;
  uint32_t ring_connections_ = 0;
  Quant quant_ = Quant::kNone;  // --quant  // what our link to the successor really has (same-host rule)
  std::vector<std::vector<uint8_t>> send_, recv_;
  std::unique_ptr<DeviceMemory> gpu_;      // --device
  std::vector<void*> dsend_, drecv_;       // --device: GPU copies of send_/recv_
  std::vector<uint8_t> expected_;
  uint64_t next_tag_ = 1;
  std::ostringstream json_;
  size_t json_rows_ = 0;
  uint64_t total_wrong_ = 0;
  size_t rows_run_ = 0;  // rows started so far, on every rank (Row::index)
  std::string ring_json_;
  double last_update_s_ = 0;  // the last pcclUpdateTopology of join(): the one that admitted the last rank  // ", \"ring\": [...]" and the prediction, added to every JSON row
  PhaseLog phases_;
};

bool Worker::join() {
  CommConfig c;
  c.master_address = o_.master;
  c.listen_address = "0.0.0.0:0";
  c.connections_per_peer = o_.connections;
  c.max_connections_per_peer = o_.max_connections;
  c.same_host_connections = o_.same_host_connections;
  c.segment_bytes = o_.segment_bytes;
  c.encrypt = o_.encrypt;
  c.algorithm = o_.algorithm;
  auto comm = Communicator::create(c);
  if (!comm.isOk()) return fail(comm.status().toString()), false;
  comm_ = std::move(comm).value();
  // The master may still be starting (all ranks are launched together): retry for a minute.
  const auto connect_deadline = Clock::now() + std::chrono::seconds(60);
  const char* wanem_rank = std::getenv("PCCL_WANEM_RANK");
  phases_.beginStep(std::string("setup:connect:") + (wanem_rank != nullptr ? wanem_rank : "?"), Clock::now());
  Status s = comm_->connect();
  while (s.code() == Code::kMasterUnreachable && Clock::now() < connect_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    s = comm_->connect();
  }
  if (!s.isOk()) return fail(s.toString()), false;
  // Everyone admitted so far votes whenever someone waits, until the run has `world` members.
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  while (static_cast<int>(comm_->topology().world_size) < o_.world) {
    if (Clock::now() > deadline) return fail("the run did not reach " + std::to_string(o_.world) + " ranks"), false;
    auto pending = comm_->arePeersPending();
    if (!pending.isOk()) return fail(pending.status().toString()), false;
    if (!*pending) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a launcher tool, not a test: fine
      continue;
    }
    const auto t0 = Clock::now();
    s = comm_->updateTopology();
    last_update_s_ = std::chrono::duration<double>(Clock::now() - t0).count();  // in automatic mode: a joiner's links measured
    if (!s.isOk() && s.code() != Code::kPeerLost && s.code() != Code::kTimeout) return fail(s.toString()), false;
  }
  rank_ = static_cast<int>(comm_->topology().rank);
  world_ = static_cast<int>(comm_->topology().world_size);
  ring_connections_ = comm_->topology().successor_connections;
  return describeRing();
}

// Names each rank by its emulator rank (PCCL_WANEM_RANK) or else its join-order ring rank, optimises
// the ring when asked, and prints the ring (and, when the links were measured, its predicted bound).
bool Worker::describeRing() {
  const char* wanem = std::getenv("PCCL_WANEM_RANK");
  const uint64_t name = wanem != nullptr ? std::strtoull(wanem, nullptr, 10) : static_cast<uint64_t>(rank_);
  double optimize_s = 0;
  if (o_.optimize) {
    const auto t0 = Clock::now();
    phases_.beginStep("setup:optimize", t0);
    Status s = comm_->optimizeTopology();
    optimize_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!s.isOk()) return fail("optimizeTopology: " + s.toString()), false;
    rank_ = static_cast<int>(comm_->topology().rank);
    ring_connections_ = comm_->topology().successor_connections;
  }
  std::vector<uint64_t> names(static_cast<size_t>(world_), 0);
  names[static_cast<size_t>(rank_)] = name;
  if (!control(names.data(), names.size(), DataType::kUint64, RedOp::kSum)) return false;
  // The slowest link of the ring as measured (ring rank i sends to i + 1).
  double bound = 0;
  auto links = comm_->links();
  if (links.isOk() && !links->empty() && world_ > 1) {
    bound = std::numeric_limits<double>::infinity();
    for (int i = 0; i < world_; ++i) {
      double bw = 0;
      for (const LinkInfo& l : *links) {
        if (static_cast<int>(l.from_rank) == i && static_cast<int>(l.to_rank) == (i + 1) % world_) bw = l.bandwidth;
      }
      bound = std::min(bound, bw);
    }
  }
  std::ostringstream ring, json;
  json << ", \"optimized\": " << (o_.optimize ? "true" : "false") << ", \"ring\": [";
  for (size_t i = 0; i < names.size(); ++i) {
    ring << (i ? " -> " : "") << names[i];
    json << (i ? ", " : "") << names[i];
  }
  json << "]";
  if (bound > 0) json << ", \"predicted_bottleneck_MBps\": " << bound / 1e6;
  if (o_.optimize) json << ", \"optimize_s\": " << optimize_s;
  // Rank 0 was there for every update: its last one admitted the last rank to join.
  double last_update = last_update_s_;
  if (!control(&last_update, 1, DataType::kFloat64, RedOp::kMax)) return false;
  json << ", \"last_join_update_s\": " << last_update;
  ring_json_ = json.str();
  if (rank_ == 0) {
    std::printf("# ring (%s): %s", wanem != nullptr ? "emulator ranks" : "join-order ranks", ring.str().c_str());
    if (bound > 0) std::printf("; predicted bottleneck %.1f MB/s (measured)", bound / 1e6);
    if (o_.optimize) std::printf("; pcclOptimizeTopology took %.2f s", optimize_s);
    std::printf("; the update admitting the last rank took %.2f s\n", last_update);
    if (links.isOk() && !links->empty()) {
      std::printf("# links measured (from -> to: MB/s, rtt ms):");
      for (const LinkInfo& l : *links) {
        std::printf(" %llu->%llu: %.1f, %.1f;", static_cast<unsigned long long>(names[l.from_rank]),
                    static_cast<unsigned long long>(names[l.to_rank]), l.bandwidth / 1e6, l.rtt_s * 1e3);
      }
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  return true;
}

bool Worker::control(void* data, size_t count, DataType t, RedOp op) {
  ReduceOptions ro;
  ro.tag = kControlTag;
  auto r = comm_->allReduce(data, data, count, t, op, ro);
  if (!r.isOk()) fail("bookkeeping all-reduce failed: " + r.status().toString());
  return r.isOk();
}

bool Worker::setUpGloo() {
  const Topology topo = comm_->topology();
  // Ring rank 0 serves the rendezvous store; its port reaches the others through a pccl all-reduce.
  uint64_t port = 0;
  std::string error;
  if (rank_ == 0) {
    store_ = StoreServer::start(topo.ring[0].host, &error);
    if (!store_) return fail(error), false;
    port = store_->port();
  }
  if (!control(&port, 1, DataType::kUint64, RedOp::kMax)) return false;
  gloo_ = GlooBackend::create(topo.ring[0].host, static_cast<uint16_t>(port), topo.ring[rank_].host, rank_, world_,
                              "pccl-bench", &error);
  if (!gloo_) return fail(error), false;
  return true;
}

// On long runs (an operation over 2 s), rank 0 says on stderr how far a row has got.
void Worker::progress(const Row& row, int done, double seconds) {
  if (rank_ != 0 || seconds < 2.0) return;
  std::fprintf(stderr, "pccl-bench: %s %s %zu B: %d of %d operations done, last %.1f s\n", row.backend.c_str(),
               row.algorithm.c_str(), row.bytes, done, o_.warmup + o_.iters, seconds);
}

// A one-element pccl all-reduce lines the ranks up before every timed operation, for both backends.
bool Worker::lineUp() {
  float token = 0;
  ReduceOptions barrier;
  barrier.tag = kBarrierTag;
  if (!comm_->allReduce(&token, &token, 1, DataType::kFloat32, RedOp::kMax, barrier).isOk()) {
    return fail("barrier failed: " + comm_->lastError()), false;
  }
  return true;
}

bool Worker::runPccl(size_t bytes, Row* row) {
  const Layout layout = layoutOf(kind_, bytes, elem_, world_);
  for (int it = 0; it < o_.warmup + o_.iters; ++it) {
    std::string error;
    std::vector<Placement> at;  // --collective: where each operation reads and writes (in place: copied)
    std::vector<Placement> on_gpu;  // --device: the same places in the GPU buffers
    for (int j = 0; j < o_.concurrent; ++j) {
      at.push_back(place(kind_, layout, elem_, rank_, o_.in_place, send_[j].data(), recv_[j].data()));
      if (!gpu_) continue;
      on_gpu.push_back(onDevice(at[j], send_[j].data(), recv_[j].data(), recv_[j].size(), dsend_[j], drecv_[j]));
      if (o_.in_place && !gpu_->copy(const_cast<void*>(on_gpu[j].src), dsend_[j], layout.send_count * elem_,
                                     PCCL_GPU_COPY_D2D, &error)) {
        return fail(error), false;
      }
    }
    if (!lineUp()) return false;
    std::vector<ReduceHandle> handles;
    if (it >= o_.warmup) phases_.begin(row->index, row->backend, row->bytes, it, Clock::now());
    const auto t0 = Clock::now();
    for (int j = 0; j < o_.concurrent; ++j) {
      ReduceOptions ro;
      ro.tag = next_tag_++;
      ro.quant = quant_;
      ro.compress = o_.compress;
      if (gpu_) ro.location = BufferLocation::kDevice;
      auto h = startPccl(*comm_, kind_, gpu_ ? on_gpu[j] : at[j], layout, dtype_, ro);
      if (!h.isOk()) return fail(h.status().toString()), false;
      handles.push_back(*h);
    }
    for (auto& h : handles) {
      auto r = h.wait();
      if (!r.isOk()) {
        return fail(std::string(collectiveName(kind_)) + " of " + std::to_string(bytes) + " bytes: " +
                    r.status().toString()),
               false;
      }
      // The same on every iteration of a size.
      row->algorithm = r->hierarchical ? (r->gathered ? "two-level-gather" : "two-level") : r->gathered ? "gather" : "ring";
    }
    const auto t1 = Clock::now();
    const double dt = std::chrono::duration<double>(t1 - t0).count();
    for (int j = 0; j < o_.concurrent; ++j) {
      if (gpu_ && !gpu_->copy(recv_[j].data(), drecv_[j], bytes, PCCL_GPU_COPY_D2H, &error)) return fail(error), false;
      check(at[j].result, layout.recv_count, "pccl", row);
      if (quantized() && sameEverywhere(kind_) && !checkIdentical(at[j].result, layout.recv_count * elem_, row)) {
        return false;
      }
    }
    if (it >= o_.warmup) {
      row->times.push_back(dt);
      phases_.mark(row->index, row->backend, row->algorithm, row->bytes, t0, t1);
    }
    progress(*row, it + 1, dt);
  }
  return true;
}

// --sync: every rank holds the same SIZE-byte state (send_[0]) except the last, whose copy is stale
// (revision 0, other bytes): it fetches all of it from the others, striped over them. The row's time is
// the slowest rank's sync; its bandwidth is the stale rank's download rate; "wrong" counts elements the
// stale rank does not hold afterwards, plus any byte the up-to-date ranks received.
bool Worker::runSync(size_t bytes, Row* row) {
  const size_t count = bytes / elem_;
  const bool stale = rank_ == world_ - 1 && world_ > 1;
  std::vector<uint8_t>& state = recv_[0];
  for (int it = 0; it < o_.warmup + o_.iters; ++it) {
    if (stale) {
      std::memset(state.data(), 0xA5 + it, bytes);
    } else {
      std::memcpy(state.data(), send_[0].data(), bytes);
    }
    SharedState s;
    s.revision = stale ? 0 : static_cast<uint64_t>(it) + 1;
    s.compress = o_.compress;
    s.tensors = {SharedTensor{"model", dtype_, count, state.data()}};
    if (!lineUp()) return false;
    if (it >= o_.warmup) phases_.begin(row->index, row->backend, row->bytes, it, Clock::now());
    const auto t0 = Clock::now();
    auto r = comm_->syncSharedState(s);
    const auto t1 = Clock::now();
    const double dt = std::chrono::duration<double>(t1 - t0).count();
    if (!r.isOk()) return fail("sync of " + std::to_string(bytes) + " bytes: " + r.status().toString()), false;
    row->wrong += countWrong(state.data(), send_[0].data(), count, elem_);
    if (!stale && r->rx_bytes != 0) ++row->wrong;
    if (stale) row->rx_bytes += r->rx_bytes;
    if (it >= o_.warmup) {
      row->times.push_back(dt);
      phases_.mark(row->index, row->backend, row->algorithm, row->bytes, t0, t1);
    }
    progress(*row, it + 1, dt);
  }
  return true;
}

// GPU buffers holding the same inputs as send_ (uploaded once; results are downloaded to be checked).
bool Worker::setUpDevice(size_t max_bytes) {
  std::string error;
  gpu_ = DeviceMemory::open(&error);
  if (!gpu_) return fail("--device: " + error), false;
  for (int j = 0; j < o_.concurrent; ++j) {
    void* s = gpu_->alloc(std::max<size_t>(max_bytes, 1), &error);
    void* r = s != nullptr ? gpu_->alloc(std::max<size_t>(max_bytes, 1), &error) : nullptr;
    if (r == nullptr || !gpu_->copy(s, send_[j].data(), max_bytes, PCCL_GPU_COPY_H2D, &error)) {
      return fail("--device: " + error), false;
    }
    dsend_.push_back(s);
    drecv_.push_back(r);
  }
  if (rank_ == 0) std::printf("# device buffers through the %s GPU backend\n", gpu_->name());
  return true;
}

std::vector<std::string> Worker::glooAlgorithms() const {
  switch (kind_) {
    case CollectiveKind::kAllReduce: return GlooBackend::algorithms();
    case CollectiveKind::kBroadcast: return {"broadcast"};
    case CollectiveKind::kAllGather: return {"allgather"};
    case CollectiveKind::kReduceScatter: return {"ring_allreduce"};
  }
  return {};
}

bool Worker::runGloo(const std::string& algorithm, size_t bytes, Row* row) {
  const size_t count = bytes / elem_;
  const Layout l = layoutOf(kind_, bytes, elem_, world_);
  uint8_t* recv = recv_[0].data();
  // Reduce-scatter: Gloo's ring all-reduce, of which a rank keeps its block. (Debian's Gloo also has
  // ReduceScatterHalvingDoubling, but it returned wrong elements in 2 of 9 runs of 64 MiB over 4 ranks
  // here, 2026-11-26: not a reference to measure against.)
  const uint8_t* result = kind_ == CollectiveKind::kReduceScatter ? recv + rank_ * l.per_rank * elem_ : recv;
  std::string error;
  for (int it = 0; it < o_.warmup + o_.iters; ++it) {
    // Gloo's broadcast and all-reduce-as-reduce-scatter work in place: the input is put there first, untimed.
    if (kind_ == CollectiveKind::kBroadcast || kind_ == CollectiveKind::kReduceScatter) {
      std::memcpy(recv, send_[0].data(), l.send_count * elem_);
    }
    if (!lineUp()) return false;
    if (it >= o_.warmup) phases_.begin(row->index, row->backend, row->bytes, it, Clock::now());
    const auto t0 = Clock::now();
    bool ok = false;
    switch (kind_) {
      case CollectiveKind::kAllReduce:
        ok = gloo_->allreduce(algorithm, dtype_, send_[0].data(), recv, count, &error);
        break;
      case CollectiveKind::kBroadcast: ok = gloo_->broadcast(dtype_, recv, l.per_rank, &error); break;
      case CollectiveKind::kAllGather: ok = gloo_->allgather(dtype_, send_[0].data(), recv, l.per_rank, &error); break;
      case CollectiveKind::kReduceScatter: ok = gloo_->allreduce("ring", dtype_, recv, recv, l.send_count, &error); break;
    }
    if (!ok) return fail(error), false;
    const auto t1 = Clock::now();
    const double dt = std::chrono::duration<double>(t1 - t0).count();
    check(result, l.recv_count, "gloo", row);
    if (it >= o_.warmup) {
      row->times.push_back(dt);
      phases_.mark(row->index, row->backend, row->algorithm, row->bytes, t0, t1);
    }
    progress(*row, it + 1, dt);
  }
  gloo_->release();
  return true;
}

void Worker::check(const uint8_t* got, size_t count, const std::string& backend, Row* row) {
  if (!quantized()) {
    row->wrong += countWrong(got, expected_.data(), count, elem_);
    return;
  }
  // |x| < 1 on every rank, so the sum of absolute values is below the world size.
  const double bound = quantBound(backend == "pccl" ? o_.quant : "none", world_, false, world_);
  double err = 0;
  row->wrong += countOutside(reinterpret_cast<const float*>(got), reinterpret_cast<const float*>(expected_.data()),
                             count, bound, &err);
  row->max_err = std::max(row->max_err, err);
}

// Every rank hashes its result; min and max over the ranks must agree.
bool Worker::checkIdentical(const uint8_t* got, size_t bytes, Row* row) {
  const uint64_t h = hashBytes(got, bytes);
  uint64_t lo_hi[2] = {h, ~h};
  if (!control(lo_hi, 2, DataType::kUint64, RedOp::kMin)) return false;
  if (lo_hi[0] != ~lo_hi[1]) ++row->hash_mismatches;  // min(h) != max(h)
  return true;
}

// Combines the ranks' numbers (max time per iteration, total wrong, max RSS) and prints on rank 0.
bool Worker::report(Row& row) {
  std::vector<double> times = row.times;  // after the all-reduce: the slowest rank's, per iteration in run order
  if (!control(times.data(), times.size(), DataType::kFloat64, RedOp::kMax)) return false;
  // The ring connections resumed so far (a reset under the run, docs/algorithms.md §6), over the ranks.
  // And the links' tuning (docs/algorithms.md §13): each rank's count of connections carrying data.
  const CommStats st = comm_->stats();
  std::vector<uint64_t> counts(4 + world_, 0);
  counts[0] = row.wrong;
  counts[1] = row.hash_mismatches;
  counts[2] = st.ring_reconnects;
  counts[3] = st.ring_connection_changes;
  counts[4 + rank_] = st.ring_active_connections;
  if (!control(counts.data(), counts.size(), DataType::kUint64, RedOp::kSum)) return false;
  double max_err = row.max_err;
  if (!control(&max_err, 1, DataType::kFloat64, RedOp::kMax)) return false;
  if (rank_ == 0 && counts[1] != 0) {
    std::fprintf(stderr, "pccl-bench: %s %zu B: results differed between ranks in %llu iterations\n",
                 row.backend.c_str(), row.bytes, static_cast<unsigned long long>(counts[1] / world_));
  }
  const uint64_t wrong = counts[0] + counts[1];
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  int64_t rss = static_cast<int64_t>(ru.ru_maxrss) * 1024;
  if (!control(&rss, 1, DataType::kInt64, RedOp::kMax)) return false;
  uint64_t sync_rx = row.rx_bytes;
  if (o_.sync && !control(&sync_rx, 1, DataType::kUint64, RedOp::kSum)) return false;
  total_wrong_ += wrong;
  if (rank_ != 0) return true;
  std::ostringstream times_json;
  for (size_t i = 0; i < times.size(); ++i) times_json << (i ? ", " : "") << times[i];
  std::sort(times.begin(), times.end());
  const double t = times.empty() ? 0 : times[times.size() / 2];
  const double t_min = times.empty() ? 0 : times.front(), t_max = times.empty() ? 0 : times.back();
  const int ops = row.backend == "pccl" ? o_.concurrent : 1;
  const double algbw = t > 0 ? static_cast<double>(row.bytes) * ops / t / 1e9 : 0;
  const double busbw = algbw * (world_ > 1 && !o_.sync ? busFactor(kind_, world_) : 1.0);
  const int conns = row.backend == "pccl" ? static_cast<int>(ring_connections_) : 1;
  std::printf("%-6s %-16s %5d %14zu %12.1f %12.3f %12.3f %10llu\n", row.backend.c_str(), row.algorithm.c_str(), conns,
              row.bytes, t * 1e6, algbw, busbw, static_cast<unsigned long long>(wrong));
  std::fflush(stdout);
  json_ << (json_rows_++ ? ",\n  " : "\n  ") << "{\"backend\": \"" << row.backend << "\", \"collective\": \""
        << collectiveName(kind_) << "\", \"algorithm\": \"" << row.algorithm << "\", \"ranks\": " << world_ << ", \"connections\": " << conns
        << ", \"concurrent\": " << ops << ", \"quant\": \"" << o_.quant << "\", \"dtype\": \"" << o_.dtype
        << "\", \"in_place\": " << (o_.in_place ? "true" : "false")
        << ", \"device\": " << (gpu_ && row.backend == "pccl" ? "true" : "false") << ", \"bytes\": " << row.bytes
        << ", \"iterations\": " << times.size() << ", \"time_s\": " << t << ", \"time_min_s\": " << t_min
        << ", \"time_max_s\": " << t_max << ", \"times_s\": [" << times_json.str() << "], \"algbw_gbps\": " << algbw
        << ", \"busbw_gbps\": " << busbw << ", \"wrong\": " << wrong << ", \"peak_rss_bytes\": " << rss;
  if (row.backend == "pccl") {
    json_ << ", \"compress\": " << o_.compress << ", \"encrypt\": " << (o_.encrypt ? "true" : "false")
          << ", \"ring_reconnects\": " << counts[2] << ", \"tuned\": " << (o_.connections == 0 ? "true" : "false")
          << ", \"connection_changes\": " << counts[3] << ", \"active_connections\": [";
    for (int r = 0; r < world_; ++r) json_ << (r ? ", " : "") << counts[4 + r];
    json_ << "]";
    if (o_.encrypt) json_ << ", \"cipher\": \"" << comm_->cipher() << "\"";
  }
  if (o_.sync) {
    json_ << ", \"sync_sources\": " << (world_ - 1) << ", \"sync_rx_bytes_per_iteration\": "
          << (o_.warmup + o_.iters > 0 ? sync_rx / static_cast<uint64_t>(o_.warmup + o_.iters) : 0);
  }
  if (quantized()) {
    json_ << ", \"max_abs_err\": " << max_err << ", \"err_bound\": "
          << quantBound(row.backend == "pccl" ? o_.quant : "none", world_, false, world_)
          << ", \"bit_identical\": " << (!sameEverywhere(kind_) ? "null" : counts[1] == 0 ? "true" : "false");
  }
  json_ << ring_json_;
  for (const auto& kv : o_.extra_json) {
    const size_t eq = kv.find('=');
    const std::string key = kv.substr(0, eq), value = eq == std::string::npos ? "" : kv.substr(eq + 1);
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    const bool number = !value.empty() && end != nullptr && *end == '\0';
    json_ << ", \"" << key << "\": " << (number ? value : "\"" + value + "\"");
  }
  json_ << "}";
  return true;
}

int Worker::run() {
  if (!dtypeOf(o_.dtype, &dtype_)) return fail("unknown dtype " + o_.dtype), 2;
  if (!collectiveOf(o_.collective, &kind_)) return fail("unknown collective " + o_.collective), 2;
  elem_ = elemSize(dtype_);
  quant_ = o_.quant == "int8"   ? Quant::kInt8
           : o_.quant == "fp4"  ? Quant::kFp4
           : o_.quant == "fp16" ? Quant::kFp16
           : o_.quant == "bf16" ? Quant::kBf16
                                : Quant::kNone;
  if (!join()) return 1;
  const bool with_pccl = o_.backend != "gloo";
  const bool with_gloo = o_.backend != "pccl" && GlooBackend::supports(dtype_);
  if (o_.backend != "pccl" && !with_gloo && rank_ == 0) {
    std::fprintf(stderr, "pccl-bench: Gloo has no %s sum here; Gloo rows skipped\n", o_.dtype.c_str());
  }
  if (with_gloo && !setUpGloo()) return 1;
  const std::vector<size_t> sizes = sizesOf(o_, elem_);
  const size_t max_bytes = sizes.empty() ? 0 : sizes.back();
  send_.assign(o_.concurrent, std::vector<uint8_t>(max_bytes));
  recv_.assign(o_.concurrent, std::vector<uint8_t>(max_bytes));
  expected_.assign(max_bytes, 0);
  if (quantized()) {
    for (auto& b : send_) fillRandom(reinterpret_cast<float*>(b.data()), max_bytes / elem_, rank_);
  } else {
    // --sync: the state is the same on every rank (rank 0's input); the stale rank's copy is overwritten.
    for (auto& b : send_) fillInput(dtype_, b.data(), max_bytes / elem_, o_.sync ? 0 : rank_);
    fillExpected(dtype_, expected_.data(), max_bytes / elem_, world_);
  }
  if (o_.device && with_pccl && !setUpDevice(max_bytes)) return 1;
  if (rank_ == 0) {
    std::printf("# pccl-bench: %s, %d ranks, dtype %s, op sum, %s, pccl: %u connections (%u to a successor on this "
                "host; rank 0 has %u), %d concurrent, segments <= %u B, quant %s, zstd %s\n",
                o_.collective.c_str(), world_, o_.dtype.c_str(), o_.in_place ? "in place" : "out of place", o_.connections,
                o_.same_host_connections != 0 ? o_.same_host_connections : o_.connections, ring_connections_,
                o_.concurrent, o_.segment_bytes, o_.quant.c_str(),
                o_.compress != 0 ? ("level " + std::to_string(o_.compress)).c_str() : "off");
    if (o_.encrypt) {
      std::printf("# encrypted: every pccl connection sealed with %s (Gloo runs in clear)\n",
                  comm_->cipher());
    }
    if (o_.sync) {
      std::printf("# shared-state sync: ranks 0..%d hold a SIZE-byte state, rank %d's copy is stale and it fetches "
                  "all of it (zstd %s); algbw = its download rate\n",
                  world_ - 2, world_ - 1, o_.compress != 0 ? "on" : "off");
    }
    if (quantized()) {
      std::printf("# quantized: inputs in [-1, 1); 'wrong' counts elements outside the documented error bound "
                  "(pccl %.3g, float32 %.3g) and results that differ between ranks\n",
                  quantBound(o_.quant, world_, false, world_), quantBound("none", world_, false, world_));
    }
    std::printf("%-6s %-16s %5s %14s %12s %12s %12s %10s\n", "#back", "algorithm", "conns", "size(B)", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "wrong");
    std::fflush(stdout);
  }
  for (size_t row_bytes : sizes) {
    // --collective: a size that splits into equal blocks; the expected result of this size.
    const Layout layout = layoutOf(kind_, row_bytes, elem_, world_);
    const size_t bytes = layout.bytes;
    if (bytes == 0) continue;
    if (quantized()) {
      fillRandomExpectedFor(kind_, reinterpret_cast<float*>(expected_.data()), layout, world_, rank_);
    } else if (!o_.sync) {
      fillExpectedFor(kind_, dtype_, expected_.data(), layout, world_, rank_);
    }
    if (with_pccl) {
      Row row{"pccl", o_.sync ? "sync" : "ring", bytes, {}, 0};  // runPccl says "gather" when it took that path
      row.index = rows_run_++;
      if (!(o_.sync ? runSync(bytes, &row) : runPccl(bytes, &row)) || !report(row)) return 1;
    }
    if (with_gloo) {
      for (const auto& algo : glooAlgorithms()) {
        Row row{"gloo", algo, bytes, {}, 0};
        row.index = rows_run_++;
        if (!runGloo(algo, bytes, &row) || !report(row)) return 1;
      }
    }
  }
  if (rank_ == 0 && !o_.json.empty()) {
    std::ofstream f(o_.json);
    f << "{\"results\": [" << json_.str() << "\n]}\n";
    if (!f) return fail("cannot write " + o_.json), 1;
  }
  gloo_.reset();
  store_.reset();
  // Ring rank 0 often shares a machine (or a script) with the master, which stops when it exits: it
  // leaves last, a moment after a final barrier, so that no rank's last bookkeeping all-reduce is still
  // settling with the master when the master goes away.
  uint64_t last = 0;
  if (!control(&last, 1, DataType::kUint64, RedOp::kSum)) return 1;
  if (rank_ == 0 && world_ > 1) std::this_thread::sleep_for(std::chrono::seconds(1));
  (void)comm_->leave();
  if (total_wrong_ != 0) {
    if (rank_ == 0) std::fprintf(stderr, "pccl-bench: %llu wrong elements\n", static_cast<unsigned long long>(total_wrong_));
    return 1;
  }
  return 0;
}

}  // namespace

int runWorker(const Options& o) {
  Worker w(o);
  return w.run();
}

}  // namespace pccl::bench
