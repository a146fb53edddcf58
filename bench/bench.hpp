// pccl-bench's shared pieces: options, sizes, deterministic inputs and their exact expected sums.
#ifndef PCCL_BENCH_BENCH_HPP_
#define PCCL_BENCH_BENCH_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pccl/types.hpp"

namespace pccl::bench {

struct Options {
  int ranks = 0;                 // --ranks N: local launcher
  std::string master;            // --master HOST:PORT: join a run (one process per rank)
  int world = 0;                 // ranks to wait for in --master mode
  std::string min_size = "4K", max_size = "64M";
  double factor = 2;
  int iters = 20, warmup = 5;
  uint32_t connections = 0;      // 0 (the library's default): each link chooses how many carry data (§13)
  uint32_t max_connections = 0;  // with connections 0: the pool (0: PCCL_MAX_CONNECTIONS, else 32)
  uint32_t same_host_connections = 1;  // K to a successor on this host; 0: as `connections`
  int concurrent = 1;
  std::string backend = "pccl";  // pccl | gloo | both
  std::string quant = "none";    // pccl wire format: none | fp16 | bf16 | int8
  int compress = 0;              // pccl: zstd level on the wire, 0 = off
  std::string dtype = "float32";
  bool in_place = false;
  bool device = false;           // pccl: buffers in GPU memory (through the GPU backend module)
  bool encrypt = false;          // pccl: every connection authenticated and encrypted (AEAD)
  bool sync = false;             // pccl: shared-state syncs (the last rank fetches) instead of all-reduces
  uint32_t segment_bytes = 1 << 20;
  std::string algorithm = "auto";  // --algorithm: CommConfig::algorithm (flat, hierarchical, auto)
  std::string json;
  std::vector<std::string> extra_json;  // --json-field KEY=VALUE: added to every JSON row (scenario scripts)
  int timeout_s = 3600;
  bool optimize = false;         // --optimize-topology: measure the links and install the best ring first
  std::string collective = "allreduce";  // allreduce | broadcast | allgather | reducescatter
};

bool parseSize(const std::string& s, size_t* out);
std::vector<size_t> sizesOf(const Options& o, size_t elem);
bool dtypeOf(const std::string& name, DataType* out);
size_t elemSize(DataType t);

// Rank r's element k is (r + 1) + (k mod 7): small integers, so the sum over any world is exact in
// every supported type and every element of every result can be checked bit for bit.
void fillInput(DataType t, void* buf, size_t count, int rank);
void fillExpected(DataType t, void* buf, size_t count, int world);
// Elements of `got` that differ from `want` (one memcmp when all is well).
size_t countWrong(const void* got, const void* want, size_t count, size_t elem);

// Quantized runs (float32 only): rank r's element k is a pseudo-random value in [-1, 1); the
// expected result is the float64 sum (or average) rounded to float32.
void fillRandom(float* buf, size_t count, int rank);
void fillRandomExpected(float* buf, size_t count, int world, bool average);
// The documented error bound (docs/algorithms.md, "Quantization") for a world of `world` peers whose
// inputs' absolute values sum to at most `abs_sum` per element. "none": float32 summation only.
double quantBound(const std::string& quant, int world, bool average, double abs_sum);
// Elements of got that differ from want by more than bound; the largest difference in *max_err.
size_t countOutside(const float* got, const float* want, size_t count, double bound, double* max_err);
// FNV-1a of the bytes: equal on every rank when the results are bit-identical.
uint64_t hashBytes(const void* data, size_t bytes);

}  // namespace pccl::bench

#endif  // PCCL_BENCH_BENCH_HPP_
