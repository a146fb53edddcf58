// Microbenchmarks of the CPU kernels (Google Benchmark), each beside memcpy of the same bytes in
// the same run: quantize, dequantize, dequantize-accumulate, fp16/bf16 conversion and the reductions.
// Throughput counts the float32 (or stored element) bytes the kernel reads from the user's buffer.
//   build/bench/pccl-codec-bench --benchmark_min_time=0.5 [--benchmark_format=json]
// Single-threaded by construction: "one core" in design.md §9.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/half.hpp"
#include "codec/quant.hpp"
#include "codec/hash.hpp"
#include "codec/reduce.hpp"
#include "net/aead.hpp"

namespace {

using namespace pccl::codec;
using pccl::kernels::floatToBf16;
using pccl::kernels::floatToHalf;

constexpr size_t kElems = size_t{4} << 20;  // 16 MiB of float32: well out of the caches

std::vector<float> randomFloats(size_t n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void finish(benchmark::State& st, size_t bytes) {
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(bytes));
}

void BM_memcpy(benchmark::State& st) {
  const std::vector<float> src = randomFloats(kElems);
  std::vector<float> dst(kElems);
  for (auto _ : st) {
    std::memcpy(dst.data(), src.data(), kElems * 4);
    benchmark::ClobberMemory();
  }
  finish(st, kElems * 4);
}

void BM_quantize(benchmark::State& st) {
  const auto q = static_cast<Quant>(st.range(0));
  const std::vector<float> src = randomFloats(kElems);
  std::vector<uint8_t> wire(wireBytes(q, DType::kFloat32, kElems));
  for (auto _ : st) {
    encode(q, DType::kFloat32, src.data(), kElems, wire.data());
    benchmark::ClobberMemory();
  }
  st.SetLabel(quantName(q));
  finish(st, kElems * 4);
}

void BM_dequantize(benchmark::State& st) {
  const auto q = static_cast<Quant>(st.range(0));
  const std::vector<float> src = randomFloats(kElems);
  std::vector<uint8_t> wire(wireBytes(q, DType::kFloat32, kElems));
  encode(q, DType::kFloat32, src.data(), kElems, wire.data());
  std::vector<float> dst(kElems);
  for (auto _ : st) {
    decode(q, DType::kFloat32, wire.data(), kElems, dst.data());
    benchmark::ClobberMemory();
  }
  st.SetLabel(quantName(q));
  finish(st, kElems * 4);
}

void BM_dequantize_accumulate(benchmark::State& st) {
  const auto q = static_cast<Quant>(st.range(0));
  const std::vector<float> src = randomFloats(kElems), in = randomFloats(kElems);
  std::vector<uint8_t> wire(wireBytes(q, DType::kFloat32, kElems));
  encode(q, DType::kFloat32, src.data(), kElems, wire.data());
  std::vector<float> dst(kElems);
  for (auto _ : st) {
    decodeReduce(q, DType::kFloat32, RedOp::kSum, wire.data(), kElems, in.data(), dst.data(), 1);
    benchmark::ClobberMemory();
  }
  st.SetLabel(quantName(q));
  finish(st, kElems * 4);
}

void BM_reduce(benchmark::State& st) {
  const auto t = static_cast<DType>(st.range(0));
  const auto op = static_cast<RedOp>(st.range(1));
  const size_t bytes = kElems * 4;
  const size_t n = bytes / dtypeSize(t);
  std::vector<uint8_t> acc(bytes), in(bytes);
  // Small integers are valid in every type (and finite in float16/bfloat16).
  for (size_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i % 5 + 1);
    const uint16_t h = t == DType::kFloat16 ? floatToHalf(v) : floatToBf16(v);
    if (dtypeSize(t) == 2) std::memcpy(in.data() + i * 2, &h, 2);
    if (t == DType::kFloat32) std::memcpy(in.data() + i * 4, &v, 4);
  }
  for (auto _ : st) {
    reduceInto(t, op, acc.data(), in.data(), n, 1);
    std::memcpy(acc.data(), in.data(), 64);  // keep the values bounded
    benchmark::ClobberMemory();
  }
  st.SetLabel(std::string(dtypeName(t)) + " " + redOpName(op));
  finish(st, bytes);
}

// The shared-state content hash (codec/hash.hpp) on 1 and 2 threads.
void BM_hash(benchmark::State& st) {
  const size_t bytes = kElems * 4;
  std::vector<uint8_t> data(bytes, 0x5a);
  for (auto _ : st) {
    Digest d = hashBuffer(data.data(), bytes, static_cast<unsigned>(st.range(0)));
    benchmark::DoNotOptimize(d);
  }
  st.SetLabel("blake2b-256 tree, " + std::to_string(st.range(0)) + " thread(s)");
  finish(st, bytes);
}

// Encryption of 1 MiB frames (what an encrypted run costs per byte on each end): arg 0 ChaCha20-Poly1305,
// 1 AES-256-GCM (skipped without AES-NI).
void BM_seal(benchmark::State& st) {
  const auto cipher = st.range(0) == 0 ? pccl::net::Cipher::kChaCha20Poly1305 : pccl::net::Cipher::kAes256Gcm;
  if (cipher == pccl::net::Cipher::kAes256Gcm && !pccl::net::aesGcmAvailable()) {
    st.SkipWithError("no AES-NI on this CPU");
    return;
  }
  constexpr size_t kFrame = size_t{1} << 20;
  std::vector<uint8_t> data(kElems * 4, 0x5a);
  pccl::net::AeadKey key{};
  pccl::net::AeadStream tx(cipher, key);
  pccl::net::AeadTag tag{};
  const uint8_t header[20] = {};
  for (auto _ : st) {
    for (size_t at = 0; at < data.size(); at += kFrame) {
      benchmark::DoNotOptimize(tx.seal(header, sizeof header, data.data() + at, kFrame, &tag));
    }
  }
  st.SetLabel(std::string(pccl::net::cipherName(cipher)) + ", 1 MiB frames");
  finish(st, data.size());
}

}  // namespace

BENCHMARK(BM_seal)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_quantize)->Arg(1)->Arg(2)->Arg(3)->Arg(4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_dequantize)->Arg(1)->Arg(2)->Arg(3)->Arg(4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_dequantize_accumulate)->Arg(1)->Arg(2)->Arg(3)->Arg(4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_reduce)
    ->Args({static_cast<int>(DType::kFloat32), static_cast<int>(RedOp::kSum)})
    ->Args({static_cast<int>(DType::kFloat32), static_cast<int>(RedOp::kMax)})
    ->Args({static_cast<int>(DType::kFloat16), static_cast<int>(RedOp::kSum)})
    ->Args({static_cast<int>(DType::kBfloat16), static_cast<int>(RedOp::kSum)})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_hash)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
