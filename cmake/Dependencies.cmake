# Every dependency comes from a Debian package (see ../shared/platform.md for the recipes).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# Standalone Asio ships no CMake config: wrap the header in our own INTERFACE target.
find_path(PCCL_ASIO_INCLUDE_DIR asio.hpp REQUIRED)
add_library(pccl_asio INTERFACE)
target_include_directories(pccl_asio SYSTEM INTERFACE ${PCCL_ASIO_INCLUDE_DIR})
target_compile_definitions(pccl_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED)
target_link_libraries(pccl_asio INTERFACE Threads::Threads)

pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)
find_package(fmt REQUIRED CONFIG)
find_package(CLI11 REQUIRED CONFIG)
find_package(zstd REQUIRED CONFIG)  # Debian: zstd::libzstd_shared / zstd::libzstd_static only
