// TrainConfig: every knob of the DiLoCo trainer, filled from the command line by main.cpp.
#ifndef PCCL_EXAMPLES_DILOCO_TRAIN_CONFIG_HPP_
#define PCCL_EXAMPLES_DILOCO_TRAIN_CONFIG_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace diloco {

struct ModelConfig {
  uint32_t d_model = 128;  // width of the byte-level transformer
  uint32_t layers = 2;
  uint32_t heads = 4;
  uint32_t seq_len = 64;   // context, in bytes
};

struct TrainConfig {
  ModelConfig model;
  std::vector<std::string> data;  // corpus files or directories (all regular files inside, sorted)
  std::string master;             // HOST:PORT of pccl-master; unused with workers == 1
  uint32_t workers = 4;           // shard count; 1 = single-worker baseline without pccl
  uint32_t worker_index = 0;      // which shard this worker trains on
  uint32_t outer_steps = 10;      // the run's: a worker stops once the shared step counter reaches it
  uint32_t inner_steps = 20;      // H: AdamW steps between two outer steps
  uint32_t batch = 16;            // sequences per inner step
  double inner_lr = 3e-3;
  double weight_decay = 0.01;
  double outer_lr = 0.7;
  double outer_momentum = 0.9;    // Nesterov
  uint64_t seed = 1;              // model init (all workers); data order is seed + worker_index
  std::string quant = "none";     // none|fp16|bf16|int8|fp4: wire format of the pseudo-gradient all-reduce
  // Streaming DiLoCo: the flat weights in `fragments` contiguous ranges of equal size, fragment p synced
  // every H inner steps (the k-th sync point at inner step floor(k H / P), fragment k mod P), its
  // all-reduce overlapped with `fragment_delay` inner steps, merged as alpha outer + (1 - alpha) local.
  uint32_t fragments = 1;
  uint32_t fragment_delay = 0;    // below H / fragments
  double fragment_alpha = -1;     // < 0: 1 without a delay, 0.5 with one
  bool streaming() const { return fragments > 1 || fragment_delay > 0 || alpha() != 1.0; }
  double alpha() const { return fragment_alpha >= 0 ? fragment_alpha : (fragment_delay == 0 ? 1.0 : 0.5); }
  uint32_t eval_batches = 4;      // held-out batches behind each logged loss
  uint32_t min_world = 0;         // peers to wait for before training (0: `workers`; 1 with late_join)
  uint32_t await_world = 0;       // scripted joins: before outer step `await_step`, wait for this many peers
  uint32_t await_step = 0;
  bool late_join = false;         // joins a run in progress: receives the state from the others (first sync)
  std::string log_path;           // optional CSV, one row per outer step
  uint32_t threads = 1;           // libtorch intra-op threads
};

}  // namespace diloco

#endif  // PCCL_EXAMPLES_DILOCO_TRAIN_CONFIG_HPP_
