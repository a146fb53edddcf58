#include "codec/gpu/loader.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace pccl::codec::gpu {

std::string directoryOf(const void* code) {
  Dl_info info{};
  if (dladdr(code, &info) == 0 || info.dli_fname == nullptr) return {};
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

Result<const pcclGpuBackend_t*> loadBackend(const std::string& path_or_name) {
  // RTLD_LOCAL: the module's runtime symbols stay out of the process's global namespace.
  void* handle = dlopen(path_or_name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status::unsupported(fmt::format("cannot load GPU backend {}: {}", path_or_name, why ? why : "unknown"));
  }
  auto fn = reinterpret_cast<pcclGpuBackendFn>(dlsym(handle, PCCL_GPU_BACKEND_SYMBOL));
  if (fn == nullptr) {
    dlclose(handle);
    return Status::unsupported(fmt::format("{} is not a pccl GPU backend (no {})", path_or_name,
                                           PCCL_GPU_BACKEND_SYMBOL));
  }
  const pcclGpuBackend_t* b = fn();
  if (b == nullptr || b->abi_version != PCCL_GPU_ABI_VERSION) {
    // Kept loaded: a module's static destructors may not expect an early unload.
    return Status::unsupported(fmt::format("GPU backend {} speaks ABI version {}, this libpccl needs {}", path_or_name,
                                           b == nullptr ? 0u : b->abi_version, PCCL_GPU_ABI_VERSION));
  }
  return b;
}

Result<const pcclGpuBackend_t*> processBackend() {
  static std::once_flag once;
  static Result<const pcclGpuBackend_t*> loaded = Status::internal("not loaded");
  std::call_once(once, [] {
    const char* env = std::getenv("PCCL_GPU_BACKEND");
    if (env != nullptr && *env != '\0') {
      loaded = loadBackend(env);
      return;
    }
    std::vector<std::string> tried;
    const std::string dir = directoryOf(reinterpret_cast<const void*>(&processBackend));
    for (const char* name : {"libpccl-gpu-hip.so", "libpccl-gpu-cuda.so"}) {
      std::vector<std::string> places;
      if (!dir.empty()) places.push_back(dir + name);
      places.emplace_back(name);
      for (const auto& p : places) {
        auto r = loadBackend(p);
        if (r.isOk()) {
          loaded = r;
          return;
        }
        tried.push_back(r.status().message());
      }
    }
    loaded = Status::unsupported(fmt::format(
        "device buffers need a GPU backend module (build with -DPCCL_ENABLE_HIP=ON or -DPCCL_ENABLE_CUDA=ON, "
        "or set PCCL_GPU_BACKEND); tried: {}",
        fmt::join(tried, "; ")));
  });
  return loaded;
}

Status gpuStatus(const pcclGpuBackend_t& b, int rc, const char* what) {
  if (rc == PCCL_GPU_OK) return Status::ok();
  const char* detail = b.last_error != nullptr ? b.last_error() : nullptr;
  std::string msg = fmt::format("{} backend: {} failed: {}", b.name, what, detail != nullptr ? detail : "no detail");
  switch (rc) {
    case PCCL_GPU_NO_DEVICE:
    case PCCL_GPU_UNSUPPORTED: return Status::unsupported(std::move(msg));
    case PCCL_GPU_BAD_ARGUMENT: return Status::invalidArgument(std::move(msg));
    default: return Status::systemError(std::move(msg));
  }
}

}  // namespace pccl::codec::gpu
