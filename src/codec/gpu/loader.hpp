// Finding and loading a GPU backend module (backend_abi.h) at run time, so that libpccl itself never
// needs a GPU runtime to load.
//
// Which module: $PCCL_GPU_BACKEND when set (a path, or a file name searched like dlopen does);
// otherwise libpccl-gpu-hip.so, then libpccl-gpu-cuda.so, each first beside the binary that holds
// libpccl's code (libpccl.so, or the executable it is linked into) and then on the loader's search
// path. The host backend (libpccl-gpu-host.so: "device" memory is host memory, kernels are the CPU
// codec) is only used when named in $PCCL_GPU_BACKEND; it exists so that the device paths run in CI.
#ifndef PCCL_CODEC_GPU_LOADER_HPP_
#define PCCL_CODEC_GPU_LOADER_HPP_

#include <string>

#include "codec/gpu/backend_abi.h"
#include "pccl/status.hpp"

namespace pccl::codec::gpu {

// The process's backend, loaded on first use; later calls return the same table (or the same error:
// Unsupported naming every place that was tried).
Result<const pcclGpuBackend_t*> processBackend();

// Loads the module at `path_or_name` (not cached; the module stays loaded for the process's life).
Result<const pcclGpuBackend_t*> loadBackend(const std::string& path_or_name);

// The folder (ending in '/') of the binary or shared library holding the code at `code`; empty if unknown.
std::string directoryOf(const void* code);

// OK for PCCL_GPU_OK; otherwise an error of the right code naming `what` and the module's last_error.
Status gpuStatus(const pcclGpuBackend_t& b, int rc, const char* what);

}  // namespace pccl::codec::gpu

#endif  // PCCL_CODEC_GPU_LOADER_HPP_
