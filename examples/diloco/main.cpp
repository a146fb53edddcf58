// diloco: a DiLoCo trainer (Douillard et al., 2023) for a byte-level transformer LM on libtorch, with
// the pseudo-gradient all-reduced through pccl. One process is one worker; `--workers 1` is the
// single-worker baseline without pccl. See README.md.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "train_config.hpp"
#include "trainer.hpp"

int main(int argc, char** argv) {
  CLI::App app{"diloco: DiLoCo training of a byte-level LM over pccl"};
  diloco::TrainConfig c;
  app.add_option("--data", c.data, "corpus files or directories")->required();
  app.add_option("--master", c.master, "HOST:PORT of pccl-master (needed unless --workers 1)");
  app.add_option("--workers", c.workers, "shard count; 1 = baseline without pccl")->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--worker-index", c.worker_index, "this worker's shard")->capture_default_str();
  app.add_option("--outer-steps", c.outer_steps, "outer steps of the run (a late joiner stops with the others)")
      ->capture_default_str();
  app.add_option("-H,--inner-steps", c.inner_steps, "inner AdamW steps per outer step")->capture_default_str()
      ->check(CLI::Range(1u, 1000000u));
  app.add_option("--batch", c.batch, "sequences per inner step")->capture_default_str()->check(CLI::Range(1u, 4096u));
  app.add_option("--seq-len", c.model.seq_len, "context in bytes")->capture_default_str()->check(CLI::Range(2u, 4096u));
  app.add_option("--d-model", c.model.d_model, "model width")->capture_default_str()->check(CLI::Range(8u, 4096u));
  app.add_option("--layers", c.model.layers, "transformer blocks")->capture_default_str()->check(CLI::Range(1u, 64u));
  app.add_option("--heads", c.model.heads, "attention heads (divides --d-model)")->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  app.add_option("--inner-lr", c.inner_lr, "AdamW learning rate")->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay, "AdamW weight decay")->capture_default_str();
  app.add_option("--outer-lr", c.outer_lr, "outer SGD learning rate")->capture_default_str();
  app.add_option("--outer-momentum", c.outer_momentum, "outer Nesterov momentum")->capture_default_str();
  app.add_option("--seed", c.seed, "model init seed (data order: seed + worker index)")->capture_default_str();
  app.add_option("--quant", c.quant, "wire format of the all-reduce")->capture_default_str()
      ->check(CLI::IsMember({"none", "fp16", "bf16", "int8", "fp4"}));
  app.add_option("--fragments", c.fragments, "Streaming DiLoCo: sync the weights in this many fragments, one "
                 "every H / fragments inner steps")->capture_default_str()->check(CLI::Range(1u, 1000000u));
  app.add_option("--fragment-delay", c.fragment_delay, "inner steps a fragment's all-reduce runs behind "
                 "(0: blocking; below H / fragments)")->capture_default_str();
  app.add_option("--fragment-alpha", c.fragment_alpha, "merge: alpha outer + (1 - alpha) local (default 1 "
                 "without a delay, 0.5 with one)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--eval-batches", c.eval_batches, "held-out batches per logged loss")->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  app.add_option("--min-world", c.min_world, "workers to wait for before training (default: --workers)");
  app.add_option("--await-world", c.await_world, "before outer step --await-step, wait for this many workers")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--await-step", c.await_step, "see --await-world (for scripted joins)")
      ->check(CLI::Range(1u, 1000000000u));
  app.add_flag("--late-join", c.late_join, "join a run in progress: receive the weights, outer momentum and step "
               "counter from the others (default --min-world 1)");
  app.add_option("--log", c.log_path, "also write one CSV row per outer step to FILE");
  app.add_option("--threads", c.threads, "intra-op threads of libtorch")->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  CLI11_PARSE(app, argc, argv);

  if (c.model.d_model % c.model.heads != 0 || c.worker_index >= c.workers) {
    std::fprintf(stderr, "diloco: --heads must divide --d-model and --worker-index be below --workers\n");
    return 2;
  }
  if (c.fragments > c.inner_steps ||
      (c.fragment_delay > 0 && c.fragment_delay >= c.inner_steps / c.fragments)) {
    std::fprintf(stderr, "diloco: --fragments must not exceed -H, and --fragment-delay must be below H / fragments "
                 "(%u)\n", c.inner_steps / std::max(1u, c.fragments));
    return 2;
  }
  if (c.workers > 1 && c.master.empty()) {
    std::fprintf(stderr, "diloco: --master HOST:PORT is needed with --workers > 1\n");
    return 2;
  }
  return c.workers == 1 ? diloco::runBaseline(c) : diloco::runDiloco(c);
}
