# GPU languages for the backend modules of src/codec/gpu (docs/gpu.md). Included by the top-level
# CMakeLists.txt after the PCCL_ENABLE_HIP / PCCL_ENABLE_CUDA options; enables HIP and/or CUDA.
set(PCCL_HIP_ARCHITECTURES "gfx90a;gfx940;gfx1030" CACHE STRING
    "AMD GPU targets of libpccl-gpu-hip.so (Debian's ROCm 5.2: gfx90a, gfx940, gfx908, gfx1030)")
set(PCCL_CUDA_ARCHITECTURES "80;90" CACHE STRING
    "NVIDIA targets of libpccl-gpu-cuda.so when CMAKE_CUDA_ARCHITECTURES is not given (CUDA 13: 75 and newer)")

if(PCCL_ENABLE_HIP)
  # Debian packages ROCm under /usr with its CMake files in the multiarch folder, where CMake's HIP
  # support does not look (it wants <root>/lib/cmake/hip-lang): point it at a shim root that links
  # there, and compile with Debian's clang-15. A ROCm from AMD (/opt/rocm) needs none of this.
  set(_pccl_debian_hip /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/hip-lang)
  set(_pccl_hip_debian OFF)
  if(NOT EXISTS /opt/rocm AND EXISTS ${_pccl_debian_hip} AND NOT DEFINED ENV{HIPCXX}
     AND (NOT CMAKE_HIP_COMPILER OR CMAKE_HIP_COMPILER MATCHES "clang\\+\\+-15$"))
    set(_pccl_hip_debian ON)
  endif()
  if(_pccl_hip_debian)
    set(_pccl_shim ${CMAKE_BINARY_DIR}/rocm-shim)
    if(NOT EXISTS ${_pccl_shim}/lib/cmake/hip-lang)
      file(MAKE_DIRECTORY ${_pccl_shim}/lib/cmake)
      file(CREATE_LINK ${_pccl_debian_hip} ${_pccl_shim}/lib/cmake/hip-lang SYMBOLIC)
    endif()
    set(CMAKE_HIP_COMPILER_ROCM_ROOT ${_pccl_shim})
    set(ENV{CMAKE_PREFIX_PATH} "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake:$ENV{CMAKE_PREFIX_PATH}")
    if(NOT CMAKE_HIP_COMPILER)
      find_program(PCCL_HIP_CLANG NAMES clang++-15)
      if(PCCL_HIP_CLANG)
        set(CMAKE_HIP_COMPILER ${PCCL_HIP_CLANG} CACHE FILEPATH "HIP compiler")
      endif()
    endif()
    # Every configure (a normal variable over the cache entry): the compiler's own checks need them too.
    set(CMAKE_HIP_FLAGS
        "--rocm-path=/usr --hip-device-lib-path=/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode ${CMAKE_HIP_FLAGS}")
  endif()
  if(NOT CMAKE_HIP_ARCHITECTURES)
    set(CMAKE_HIP_ARCHITECTURES ${PCCL_HIP_ARCHITECTURES})
  endif()
  include(CheckLanguage)
  check_language(HIP)
  if(NOT CMAKE_HIP_COMPILER)
    message(FATAL_ERROR "PCCL_ENABLE_HIP=ON but no HIP compiler was found. On Debian 12: apt-get install hipcc "
                        "libamdhip64-dev rocm-device-libs clang-15; elsewhere set CMAKE_HIP_COMPILER or HIPCXX.")
  endif()
  enable_language(HIP)
  message(STATUS "pccl: HIP backend for ${CMAKE_HIP_ARCHITECTURES} with ${CMAKE_HIP_COMPILER}")
endif()

if(PCCL_ENABLE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${PCCL_CUDA_ARCHITECTURES})
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "PCCL_ENABLE_CUDA=ON but no CUDA compiler (nvcc) was found: install the CUDA toolkit "
                        "or set CMAKE_CUDA_COMPILER / CUDACXX.")
  endif()
  enable_language(CUDA)
  message(STATUS "pccl: CUDA backend for ${CMAKE_CUDA_ARCHITECTURES} with ${CMAKE_CUDA_COMPILER}")
endif()
