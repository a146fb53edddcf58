#include "trainer.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "corpus.hpp"
#include "elastic_reducer.hpp"
#include "outer_optimizer.hpp"
#include "torch_model.hpp"

namespace diloco {
namespace {

using Clock = std::chrono::steady_clock;

// Random windows of the worker's shard: inputs [B, T] and next-byte targets [B, T].
class Batcher {
 public:
  Batcher(std::vector<uint8_t> bytes, uint64_t seed) : bytes_(std::move(bytes)), rng_(seed) {}
  std::pair<torch::Tensor, torch::Tensor> next(uint32_t batch, uint32_t seq_len) {
    std::uniform_int_distribution<size_t> start(0, bytes_.size() - seq_len - 1);
    std::vector<size_t> starts(batch);
    for (auto& s : starts) s = start(rng_);
    return windows(bytes_, starts, seq_len);
  }
  static std::pair<torch::Tensor, torch::Tensor> windows(const std::vector<uint8_t>& bytes,
                                                         const std::vector<size_t>& starts, uint32_t seq_len) {
    const auto b = static_cast<int64_t>(starts.size()), t = static_cast<int64_t>(seq_len);
    auto x = torch::empty({b, t}, torch::kInt64), y = torch::empty({b, t}, torch::kInt64);
    auto xa = x.accessor<int64_t, 2>(), ya = y.accessor<int64_t, 2>();
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j < t; ++j) {
        xa[i][j] = bytes[starts[static_cast<size_t>(i)] + static_cast<size_t>(j)];
        ya[i][j] = bytes[starts[static_cast<size_t>(i)] + static_cast<size_t>(j) + 1];
      }
    }
    return {x, y};
  }

 private:
  std::vector<uint8_t> bytes_;
  std::mt19937_64 rng_;
};

torch::Tensor lossOf(ByteLm& model, const torch::Tensor& x, const torch::Tensor& y) {
  return torch::nn::functional::cross_entropy(model->forward(x).view({-1, 256}), y.view({-1}));
}

// Mean loss over fixed, evenly spaced windows of the held-out text: the same on every worker.
double evalLoss(ByteLm& model, const std::vector<uint8_t>& eval, const TrainConfig& config) {
  torch::NoGradGuard no_grad;
  const uint32_t t = config.model.seq_len, n = config.eval_batches * config.batch;
  const size_t stride = (eval.size() - t - 1) / n;
  double total = 0;
  for (uint32_t b = 0; b < config.eval_batches; ++b) {
    std::vector<size_t> starts(config.batch);
    for (uint32_t i = 0; i < config.batch; ++i) starts[i] = stride * (b * config.batch + i);
    auto [x, y] = Batcher::windows(eval, starts, t);
    total += lossOf(model, x, y).item<double>();
  }
  return total / config.eval_batches;
}

// One worker's model, inner optimizer and data.
struct Worker {
  ByteLm model{nullptr};
  std::unique_ptr<torch::optim::AdamW> inner;
  torch::optim::AdamWOptions inner_options{0};
  std::unique_ptr<Batcher> batcher;
  Corpus corpus;

  double innerSteps(const TrainConfig& config, uint32_t steps) {
    model->train();
    double total = 0;
    for (uint32_t i = 0; i < steps; ++i) {
      auto [x, y] = batcher->next(config.batch, config.model.seq_len);
      inner->zero_grad();
      auto loss = lossOf(model, x, y);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      inner->step();
      total += loss.item<double>();
    }
    return total / steps;
  }

  // Fresh AdamW moments (and step count) over the model's parameters.
  void resetInner() { inner = std::make_unique<torch::optim::AdamW>(model->parameters(), inner_options); }
};

std::unique_ptr<Worker> makeWorker(const TrainConfig& config, uint32_t shard_count) {
  auto corpus = loadCorpus(config.data);
  if (!corpus.isOk()) {
    std::fprintf(stderr, "diloco: %s\n", corpus.status().toString().c_str());
    return nullptr;
  }
  torch::set_num_threads(static_cast<int>(config.threads));
  auto w = std::make_unique<Worker>();
  torch::manual_seed(config.seed);  // every worker started together begins from the same weights
  w->model = ByteLm(config.model);
  w->inner_options = torch::optim::AdamWOptions(config.inner_lr).weight_decay(config.weight_decay).betas({0.9, 0.95});
  w->resetInner();
  w->corpus = std::move(*corpus);
  w->batcher = std::make_unique<Batcher>(shardOf(w->corpus.train, config.worker_index % shard_count, shard_count),
                                         config.seed * 1000003ull + config.worker_index);
  return w;
}

// The one log line (and CSV row) per outer step.
struct StepLog {
  int64_t step = 0;
  double loss = 0, train_loss = 0, time_s = 0;
  uint32_t world = 1;
  uint64_t bytes_tx = 0, bytes_every_step = 0, hash = 0;
};

class Logger {
 public:
  Logger(const TrainConfig& config) : worker_(config.worker_index) {
    if (config.log_path.empty()) return;
    csv_ = std::fopen(config.log_path.c_str(), "w");
    if (csv_ != nullptr) {
      std::fprintf(csv_, "outer_step,worker,loss,train_loss,world,bytes_tx,bytes_allreduce_every_step,time_s,hash\n");
    }
  }
  ~Logger() {
    if (csv_ != nullptr) std::fclose(csv_);
  }
  void log(const StepLog& s) {
    std::printf("outer_step=%lld worker=%u loss=%.4f train_loss=%.4f world=%u bytes_tx=%llu "
                "bytes_allreduce_every_step=%llu time_s=%.2f hash=%016llx\n",
                static_cast<long long>(s.step), worker_, s.loss, s.train_loss, s.world,
                static_cast<unsigned long long>(s.bytes_tx), static_cast<unsigned long long>(s.bytes_every_step),
                s.time_s, static_cast<unsigned long long>(s.hash));
    std::fflush(stdout);
    if (csv_ == nullptr) return;
    std::fprintf(csv_, "%lld,%u,%.5f,%.5f,%u,%llu,%llu,%.3f,%016llx\n", static_cast<long long>(s.step), worker_,
                 s.loss, s.train_loss, s.world, static_cast<unsigned long long>(s.bytes_tx),
                 static_cast<unsigned long long>(s.bytes_every_step), s.time_s,
                 static_cast<unsigned long long>(s.hash));
    std::fflush(csv_);
  }

 private:
  uint32_t worker_;
  std::FILE* csv_ = nullptr;
};

// What the workers of a run keep byte-identical through pccl's shared-state sync (ElasticReducer): the
// outer weights, the outer optimizer's momentum, the number of outer steps completed (with fragments:
// fragment sync points passed), which is also the state's revision, and the inner steps already taken
// towards the next sync point (0, or the fragment delay: where a joiner resumes the schedule). A worker that starts (or joins late) announces revision 0 and so receives every
// tensor that differs from the elected content; workers started together hold the same seed weights and
// zero momentum, so their first sync moves nothing. Not copyable: `shared` points into the members.
struct OuterState {
  std::vector<float> theta;
  OuterOptimizer outer;
  int64_t step = 0;
  int64_t phase = 0;
  pccl::SharedState shared;

  OuterState(std::vector<float> initial, const TrainConfig& config)
      : theta(std::move(initial)),
        outer(theta.size(), static_cast<float>(config.outer_lr), static_cast<float>(config.outer_momentum)) {
    shared.revision = 0;
    shared.tensors = {
        pccl::SharedTensor{"theta", pccl::DataType::kFloat32, theta.size(), theta.data()},
        pccl::SharedTensor{"outer_velocity", pccl::DataType::kFloat32, outer.velocity().size(),
                           outer.velocity().data()},
        pccl::SharedTensor{"outer_step", pccl::DataType::kInt64, 1, &step},
        pccl::SharedTensor{"fragment_phase", pccl::DataType::kInt64, 1, &phase},
    };
  }
  OuterState(const OuterState&) = delete;
  OuterState& operator=(const OuterState&) = delete;

  void stepDone() {
    step += 1;
    shared.revision = static_cast<uint64_t>(step);
  }
  uint64_t hash() const { return fnv1a(theta.data(), theta.size() * sizeof(float)); }
};

// Bytes one peer sends in a float32 ring all-reduce of `count` elements among `world` peers.
uint64_t ringBytes(size_t count, uint32_t world) {
  return world <= 1 ? 0 : 2ull * (world - 1) * count * sizeof(float) / world;
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Streaming DiLoCo's schedule: sync point k (0-based) comes floor((k + 1) H / P) inner steps after the
// start and syncs fragment k mod P, the contiguous range [f N / P, (f + 1) N / P) of the flat weights.
struct FragmentSchedule {
  uint32_t H, P;
  size_t count;
  uint32_t interval(int64_t k) const {
    const auto f = static_cast<uint32_t>(k % P);
    return (f + 1) * H / P - f * H / P;
  }
  size_t begin(int64_t k) const { return static_cast<size_t>(k % P) * count / P; }
  size_t size(int64_t k) const { return (static_cast<size_t>(k % P) + 1) * count / P - begin(k); }
};

// The held-out loss of the outer weights theta: the same on every worker. With fragments the worker's
// model differs from theta outside the fragment just synced: it is set aside and restored.
double evalOuter(Worker& w, const std::vector<float>& theta, const TrainConfig& config, std::vector<float>& scratch) {
  if (!config.streaming()) return evalLoss(w.model, w.corpus.eval, config);  // the model is theta
  copyParametersTo(*w.model, scratch);
  copyParametersFrom(*w.model, theta);
  const double loss = evalLoss(w.model, w.corpus.eval, config);
  copyParametersFrom(*w.model, scratch);
  return loss;
}

}  // namespace

int runDiloco(const TrainConfig& config) {
  pccl::Quant quant;
  if (!parseQuant(config.quant, quant)) return 2;
  auto worker = makeWorker(config, config.workers);
  if (!worker) return 1;
  std::vector<float> initial, now;
  copyParametersTo(*worker->model, initial);
  OuterState state(std::move(initial), config);
  auto fail = [&](const pccl::Status& st) {
    std::fprintf(stderr, "diloco: worker %u: %s\n", config.worker_index, st.toString().c_str());
    return 1;
  };
  // Joining ends with the first sync (the group's state replaces ours where it differs).
  auto reducer = ElasticReducer::connect(config.master, config.worker_index, &state.shared, config.late_join);
  if (!reducer.isOk()) return fail(reducer.status());
  ElasticReducer& r = **reducer;
  const uint32_t min_world = config.min_world != 0 ? config.min_world : (config.late_join ? 1 : config.workers);
  pccl::Status joined = r.waitForWorld(min_world, 120000);
  if (!joined.isOk()) return fail(joined);

  // After a sync that replaced some of this worker's state, the torch model restarts from the received
  // theta. The inner AdamW state is per worker and never shared: a late joiner trains with fresh AdamW
  // moments, which is normal in DiLoCo (the inner optimizer is local to each worker, its moments
  // re-estimate within a few inner steps, and the outer step averages over every worker). A worker whose
  // weights were replaced (it was out of date) drops its moments too: they belonged to other weights.
  uint32_t changes_seen = 0;
  int64_t done = 0;  // inner steps already taken towards the next sync point
  auto adoptSyncedState = [&] {
    if (r.syncTotals().state_changes == changes_seen) return;
    changes_seen = r.syncTotals().state_changes;
    copyParametersFrom(*worker->model, state.theta);
    done = state.phase;  // a joiner resumes the group's schedule
    worker->resetInner();
    std::printf("worker=%u adopted the group's state: outer_step=%lld hash=%016llx (fresh inner AdamW state)\n",
                config.worker_index, static_cast<long long>(state.step),
                static_cast<unsigned long long>(state.hash()));
    std::fflush(stdout);
  };
  adoptSyncedState();
  std::printf("worker=%u params=%zu shard=%u/%u quant=%s fragments=%u fragment_delay=%u fragment_alpha=%.2f\n",
              config.worker_index, state.theta.size(), config.worker_index % config.workers, config.workers,
              config.quant.c_str(), config.fragments, config.fragment_delay, config.alpha());
  const FragmentSchedule schedule{config.inner_steps, config.fragments, state.theta.size()};
  const uint32_t tau = config.fragment_delay;
  const double alpha = config.alpha();
  std::vector<float> grad, scratch;

  Logger logger(config);
  const auto start = Clock::now();
  StepLog s;
  s.step = state.step;  // a late joiner continues the run's numbering
  s.loss = s.train_loss = evalOuter(*worker, state.theta, config, scratch);
  s.world = r.worldSize();
  s.hash = state.hash();
  logger.log(s);
  // --outer-steps counts the run's outer steps, not this worker's: a late joiner stops with the others.
  // With fragments a step is one fragment's sync, P of them per H inner steps.
  while (state.step < static_cast<int64_t>(config.outer_steps) * config.fragments) {
    state.phase = done;  // what a sync tells a joiner: where this sync point's inner steps stand
    pccl::Status member = r.syncMembership();
    if (member.isOk() && config.await_world != 0 && state.step + 1 == static_cast<int64_t>(config.await_step)) {
      member = r.waitForWorld(config.await_world, 120000);
    }
    if (!member.isOk()) return fail(member);
    adoptSyncedState();
    const int64_t k = state.step;
    const size_t begin = schedule.begin(k), n = schedule.size(k);
    const uint32_t steps = schedule.interval(k) - static_cast<uint32_t>(done);
    s.train_loss = steps > 0 ? worker->innerSteps(config, steps) : s.train_loss;
    copyParametersTo(*worker->model, now);
    grad.resize(n);
    for (size_t i = 0; i < n; ++i) grad[i] = state.theta[begin + i] - now[begin + i];  // pseudo-gradient
    const uint32_t changes_before = r.syncTotals().state_changes;
    pccl::Result<ReduceStats> reduced = ReduceStats{};
    if (tau == 0) {
      state.phase = 0;
      reduced = r.allReduceAvg(grad.data(), n, quant);
      if (!reduced.isOk()) return fail(reduced.status());
      state.stepDone();
    } else {
      // In the background while the next tau inner steps run. A sync in its failure path hands a joiner
      // this sync point (not yet done) and phase tau: what every other member's state says then too.
      const PendingReduce pending = r.startAllReduceAvg(grad.data(), n, quant);
      s.train_loss = worker->innerSteps(config, tau);
      state.phase = tau;
      reduced = r.finishAllReduceAvg(pending, grad.data(), n, quant);
      if (!reduced.isOk()) return fail(reduced.status());
      state.stepDone();
    }
    done = tau;
    if (r.syncTotals().state_changes != changes_before) {
      // Only a worker that was out of date gets here: its pseudo-gradient was taken against its old theta.
      std::printf("worker=%u theta was replaced during the all-reduce's retry\n", config.worker_index);
      adoptSyncedState();
    }
    {  // the group's average: the same outer step on every worker
      state.outer.step(state.theta, grad.data(), begin, n);
      copyParametersTo(*worker->model, now);  // the model moved on during the tau steps (or was replaced)
      for (size_t i = begin; i < begin + n; ++i) {  // the merge: plain replacement when alpha is 1
        now[i] = alpha == 1.0 ? state.theta[i]
                              : static_cast<float>(alpha * state.theta[i] + (1.0 - alpha) * now[i]);
      }
      copyParametersFrom(*worker->model, now);
    }
    s.step = state.step;
    s.world = reduced->world_size;
    s.bytes_tx += reduced->tx_bytes;
    s.bytes_every_step += schedule.interval(k) * ringBytes(state.theta.size(), s.world);
    s.loss = evalOuter(*worker, state.theta, config, scratch);
    s.time_s = secondsSince(start);
    s.hash = state.hash();
    logger.log(s);
  }
  const SyncTotals& t = r.syncTotals();
  std::printf("worker=%u done: outer_step=%lld syncs=%u state_changes=%u sync_tx_bytes=%llu sync_rx_bytes=%llu\n",
              config.worker_index, static_cast<long long>(state.step), t.syncs, t.state_changes,
              static_cast<unsigned long long>(t.tx_bytes), static_cast<unsigned long long>(t.rx_bytes));
  const pccl::CommStats c = r.stats();  // the communicator's own counters (pcclGetStats in C)
  std::printf("worker=%u stats: allreduce_ops=%llu aborts=%llu retries=%llu syncs=%llu topology_updates=%llu "
              "epoch=%llu tx_bytes=%llu rx_bytes=%llu last_allreduce_s=%.3f last_throughput_MBps=%.1f\n",
              config.worker_index, static_cast<unsigned long long>(c.allreduce_ops),
              static_cast<unsigned long long>(c.allreduce_aborts), static_cast<unsigned long long>(c.allreduce_retries),
              static_cast<unsigned long long>(c.sync_ops), static_cast<unsigned long long>(c.topology_updates),
              static_cast<unsigned long long>(c.epoch), static_cast<unsigned long long>(c.tx_bytes),
              static_cast<unsigned long long>(c.rx_bytes), c.last_allreduce_seconds,
              c.last_allreduce_bytes_per_second / 1e6);
  return 0;
}

int runBaseline(const TrainConfig& config) {
  auto worker = makeWorker(config, 1);
  if (!worker) return 1;
  std::vector<float> theta;
  Logger logger(config);
  const auto start = Clock::now();
  StepLog s;
  s.step = 0;
  s.loss = s.train_loss = evalLoss(worker->model, worker->corpus.eval, config);
  copyParametersTo(*worker->model, theta);
  s.hash = fnv1a(theta.data(), theta.size() * sizeof(float));
  logger.log(s);
  for (uint32_t i = 0; i < config.outer_steps; ++i) {
    s.train_loss = worker->innerSteps(config, config.inner_steps);
    copyParametersTo(*worker->model, theta);
    s.step += 1;
    s.loss = evalLoss(worker->model, worker->corpus.eval, config);
    s.time_s = secondsSince(start);
    s.hash = fnv1a(theta.data(), theta.size() * sizeof(float));
    logger.log(s);
  }
  return 0;
}

}  // namespace diloco
