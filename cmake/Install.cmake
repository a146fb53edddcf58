include(CMakePackageConfigHelpers)

install(TARGETS pccl pccl-master EXPORT pcclTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
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

configure_file(cmake/pccl.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pccl.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
