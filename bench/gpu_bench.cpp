// pccl-gpu-bench: throughput of a GPU backend module's kernels (backend_abi.h), each beside a
// device-to-device memcpy of the same bytes in the same run.
//
//   pccl-gpu-bench [--backend PATH] [--json FILE] [--bytes N[K|M|G]] [--iters N] [--reps N]
//
// Rows: encode (quantize; fp16/bf16 of float32/float64 is the conversion), decode (dequantize),
// decode_reduce sum (dequantize-accumulate) for every quantized (quant, dtype), and reduce sum for
// float32/float16/bfloat16/float64. Each row runs `iters` calls between two stream_synchronize, `reps`
// times, and reports the median: time per call, GB/s of input data (bytes of the uncompressed
// elements, 1 GB = 1e9 B), GB/s of memory traffic (bytes read + written), and the ratio to memcpy's
// data GB/s. The JSON file holds {"backend", "device_count", "results": [...]}, one object per row.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/dtype.hpp"
#include "codec/gpu/loader.hpp"
#include "kernels/half.hpp"
#include "codec/quant.hpp"

using namespace pccl;
using codec::DType;
using codec::Quant;
using codec::RedOp;

namespace {

struct Options {
  std::string backend;
  std::string json;
  size_t bytes = size_t{64} << 20;
  int iters = 20;
  int reps = 5;
};

struct Row {
  std::string kernel;
  Quant quant = Quant::kNone;
  DType dtype = DType::kFloat32;
  size_t data_bytes = 0;     // input elements
  size_t traffic_bytes = 0;  // read + written per call
  double time_s = 0;
  double memcpy_gbps = 0;
  double gbps() const { return static_cast<double>(data_bytes) / time_s / 1e9; }
  double trafficGbps() const { return static_cast<double>(traffic_bytes) / time_s / 1e9; }
};

bool parseBytes(const std::string& s, size_t* out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return false;
  double mult = 1;
  const std::string unit = end;
  if (unit == "K")
    mult = 1 << 10;
  else if (unit == "M")
    mult = 1 << 20;
  else if (unit == "G")
    mult = 1 << 30;
  else if (!unit.empty())
    return false;
  *out = static_cast<size_t>(v * mult);
  return *out > 0;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--backend" && has_value) {
      o->backend = argv[++i];
    } else if (a == "--json" && has_value) {
      o->json = argv[++i];
    } else if (a == "--bytes" && has_value) {
      if (!parseBytes(argv[++i], &o->bytes)) return false;
    } else if (a == "--iters" && has_value) {
      o->iters = std::atoi(argv[++i]);
    } else if (a == "--reps" && has_value) {
      o->reps = std::atoi(argv[++i]);
    } else {
      return false;
    }
  }
  return o->iters > 0 && o->reps > 0;
}

std::string besideBuildTree(const char* argv0, const char* name) {
  const std::string exe = argv0;
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? std::string("../src/") + name : exe.substr(0, slash) + "/../src/" + name;
}

Result<const pcclGpuBackend_t*> load(const std::string& flag, const char* argv0) {
  if (!flag.empty()) return codec::gpu::loadBackend(flag);
  const char* env = std::getenv("PCCL_GPU_BACKEND");
  if (env != nullptr && *env != '\0') return codec::gpu::loadBackend(env);
  for (const char* name : {"libpccl-gpu-hip.so", "libpccl-gpu-cuda.so"}) {
    for (const std::string& p : {besideBuildTree(argv0, name), std::string(name)}) {
      auto r = codec::gpu::loadBackend(p);
      if (r.isOk()) return r;
    }
  }
  return Status::unsupported("no GPU backend module found (use --backend PATH)");
}

class Bench {
 public:
  Bench(const pcclGpuBackend_t& api, const Options& o) : api_(api), o_(o) {}
  ~Bench() {
    for (void* p : buf_) static_cast<void>(api_.device_free(p));
    if (stream_ != nullptr) static_cast<void>(api_.stream_destroy(stream_));
  }

  // Device buffers: input, second input, output, wire.
  bool setUp() {
    if (!ok(api_.stream_create(&stream_), "stream_create")) return false;
    for (void*& p : buf_) {
      if (!ok(api_.device_alloc(&p, o_.bytes + 4096), "device_alloc")) return false;
    }
    return true;
  }

  // Both inputs := random values in [-1, 1] stored as dtype t.
  bool fill(DType t) {
    const size_t count = o_.bytes / codec::dtypeSize(t);
    std::vector<float> values(count);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& x : values) x = u(rng);
    std::vector<uint8_t> host(count * codec::dtypeSize(t));
    for (size_t i = 0; i < count; ++i) {
      if (t == DType::kFloat64) {
        const double d = values[i];
        std::memcpy(host.data() + 8 * i, &d, 8);
      } else if (t == DType::kFloat32) {
        std::memcpy(host.data() + 4 * i, &values[i], 4);
      } else {
        const uint16_t h = t == DType::kFloat16 ? kernels::floatToHalf(values[i]) : kernels::floatToBf16(values[i]);
        std::memcpy(host.data() + 2 * i, &h, 2);
      }
    }
    for (int s = 0; s < 2; ++s) {
      if (!ok(api_.memcpy_async(buf_[s], host.data(), host.size(), PCCL_GPU_COPY_H2D, stream_), "memcpy")) return false;
    }
    return ok(api_.stream_synchronize(stream_), "stream_synchronize");
  }

  // Median seconds per call of fn over reps batches of iters calls.
  template <typename Fn>
  double time(const Fn& fn) {
    for (int w = 0; w < 2; ++w) fn();
    static_cast<void>(api_.stream_synchronize(stream_));
    std::vector<double> t;
    for (int r = 0; r < o_.reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < o_.iters; ++i) fn();
      if (!ok(api_.stream_synchronize(stream_), "stream_synchronize")) return -1;
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o_.iters);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }

  double memcpyGbps(size_t bytes) {
    const double s =
        time([&] { ok(api_.memcpy_async(buf_[2], buf_[0], bytes, PCCL_GPU_COPY_D2D, stream_), "memcpy"); });
    return static_cast<double>(bytes) / s / 1e9;
  }

  std::vector<Row> run() {
    std::vector<Row> rows;
    const double copy = memcpyGbps(o_.bytes);
    rows.push_back({"memcpy_d2d", Quant::kNone, DType::kUint8, o_.bytes, 2 * o_.bytes,
                    static_cast<double>(o_.bytes) / copy / 1e9, copy});
    const int sum = static_cast<int>(RedOp::kSum);
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBfloat16, DType::kFloat64}) {
      if (!fill(t)) break;
      const int ti = static_cast<int>(t);
      const size_t count = o_.bytes / codec::dtypeSize(t);
      const size_t data = count * codec::dtypeSize(t);
      for (Quant q : {Quant::kFp16, Quant::kBf16, Quant::kInt8}) {
        if (!codec::checkQuant(q, t, RedOp::kSum).isOk()) continue;
        const size_t wire = codec::wireBytes(q, t, count);
        const int qi = static_cast<int>(q);
        add(rows, "encode", q, t, data, data + wire, copy,
            [&] { ok(api_.encode(qi, ti, buf_[0], count, buf_[3], stream_), "encode"); });
        add(rows, "decode", q, t, data, wire + data, copy,
            [&] { ok(api_.decode(qi, ti, buf_[3], count, buf_[2], stream_), "decode"); });
        add(rows, "decode_reduce_sum", q, t, data, wire + 2 * data, copy, [&] {
          ok(api_.decode_reduce(qi, ti, sum, buf_[3], count, buf_[1], buf_[2], 1, stream_), "decode_reduce");
        });
      }
      add(rows, "reduce_sum", Quant::kNone, t, data, 3 * data, copy,
          [&] { ok(api_.reduce(ti, sum, buf_[2], buf_[1], count, 1, stream_), "reduce"); });
    }
    return rows;
  }

  bool failed() const { return failed_; }

 private:
  template <typename Fn>
  void add(std::vector<Row>& rows, const char* kernel, Quant q, DType t, size_t data, size_t traffic, double copy,
           const Fn& fn) {
    const double s = time(fn);
    if (s > 0) rows.push_back({kernel, q, t, data, traffic, s, copy});
  }

  bool ok(int rc, const char* what) {
    if (rc == PCCL_GPU_OK) return true;
    if (!failed_) std::fprintf(stderr, "pccl-gpu-bench: %s failed: %s\n", what, api_.last_error());
    failed_ = true;
    return false;
  }

  const pcclGpuBackend_t& api_;
  const Options& o_;
  pcclGpuStream_t stream_ = nullptr;
  void* buf_[4] = {};
  bool failed_ = false;
};

void print(const std::vector<Row>& rows) {
  std::printf("%-18s %-5s %-9s %12s %10s %10s %12s %9s\n", "kernel", "quant", "dtype", "bytes", "time_us", "GB/s",
              "traffic_GB/s", "vs_memcpy");
  for (const Row& r : rows) {
    std::printf("%-18s %-5s %-9s %12zu %10.1f %10.1f %12.1f %9.2f\n", r.kernel.c_str(), codec::quantName(r.quant),
                r.kernel == "memcpy_d2d" ? "bytes" : codec::dtypeName(r.dtype), r.data_bytes, r.time_s * 1e6, r.gbps(),
                r.trafficGbps(), r.gbps() / r.memcpy_gbps);
  }
}

bool writeJson(const std::string& path, const std::string& backend, int devices, const std::vector<Row>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\"backend\": \"%s\", \"device_count\": %d, \"results\": [\n", backend.c_str(), devices);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "  {\"kernel\": \"%s\", \"quant\": \"%s\", \"dtype\": \"%s\", \"bytes\": %zu, \"traffic_bytes\": %zu, "
                 "\"time_s\": %.9g, \"gbps\": %.6g, \"traffic_gbps\": %.6g, \"memcpy_gbps\": %.6g, \"vs_memcpy\": "
                 "%.4g}%s\n",
                 r.kernel.c_str(), codec::quantName(r.quant),
                 r.kernel == "memcpy_d2d" ? "bytes" : codec::dtypeName(r.dtype), r.data_bytes, r.traffic_bytes,
                 r.time_s, r.gbps(), r.trafficGbps(), r.memcpy_gbps, r.gbps() / r.memcpy_gbps,
                 i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "]}\n");
  return std::fclose(f) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr, "usage: %s [--backend PATH] [--json FILE] [--bytes N[K|M|G]] [--iters N] [--reps N]\n",
                 argv[0]);
    return 2;
  }
  auto loaded = load(o.backend, argv[0]);
  if (!loaded.isOk()) {
    std::fprintf(stderr, "pccl-gpu-bench: %s\n", loaded.status().message().c_str());
    return 1;
  }
  const pcclGpuBackend_t& api = *loaded.value();
  int devices = 0;
  if (api.device_count(&devices) != PCCL_GPU_OK || devices == 0) {
    std::printf("pccl-gpu-bench: skipped: the %s backend sees no GPU (%s)\n", api.name, api.last_error());
    return 77;
  }
  if (api.set_device(0) != PCCL_GPU_OK) {
    std::fprintf(stderr, "pccl-gpu-bench: set_device: %s\n", api.last_error());
    return 1;
  }
  std::printf("pccl-gpu-bench: %s backend, %zu bytes per buffer, %d x %d calls\n", api.name, o.bytes, o.reps, o.iters);
  Bench bench(api, o);
  if (!bench.setUp()) return 1;
  const std::vector<Row> rows = bench.run();
  print(rows);
  if (!o.json.empty() && !writeJson(o.json, api.name, devices, rows)) {
    std::fprintf(stderr, "pccl-gpu-bench: cannot write %s\n", o.json.c_str());
    return 1;
  }
  return bench.failed() ? 1 : 0;
}
