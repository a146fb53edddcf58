include(CMakePackageConfigHelpers)

# The public C++ headers (status.hpp: std::optional, std::string_view) need C++17: consumers of
# pccl::pccl get it (C sources are unaffected). The include directory comes with the target itself
# ($<INSTALL_INTERFACE:...> in src/CMakeLists.txt).
target_compile_features(pccl INTERFACE cxx_std_17)
install(TARGETS pccl pccl-master EXPORT pcclTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# GPU backend modules, when built, go beside libpccl, where its loader looks first (docs/gpu.md). The
# host backend (the GPU ABI on the CPU) is for tests and is not installed.
foreach(gpu hip cuda)
  if(TARGET pccl-gpu-${gpu})
    install(TARGETS pccl-gpu-${gpu} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endforeach()
install(DIRECTORY include/pccl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/include/pccl/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pccl)
install(EXPORT pcclTargets NAMESPACE pccl:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pccl)

configure_package_config_file(cmake/pcclConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/pcclConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pccl)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pcclConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pcclConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/pcclConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pccl)

# pccl.pc locates the prefix from its own directory (${pcfiledir}), so the installed tree can be moved
# or installed with `cmake --install --prefix DIR`; absolute GNUInstallDirs paths are kept as they are.
# libpccl.so links its dependencies privately and there is no static libpccl: -lpccl is all a
# consumer needs (no Requires.private / Libs.private).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(PCCL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(PCCL_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _pccl_pc_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")  # "../..", "../../.." (multiarch)
  string(REGEX REPLACE "/$" "" _pccl_pc_up "${_pccl_pc_up}")
  set(PCCL_PC_PREFIX "\${pcfiledir}/${_pccl_pc_up}")
  set(PCCL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(PCCL_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(PCCL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/pccl.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pccl.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
