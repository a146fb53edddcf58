# pccl-release-suite: every target of the default build except the unit and cluster test programs
# (tests/CMakeLists.txt, pccl_unit_test_target). scripts/test.sh builds it in build/, whose ctest phase
# runs only the release-only tests (bench, emulator, GPU emulation, Python, packaging, DiLoCo); the
# unit and cluster tests are built and run in the sanitizer trees. `cmake --build build` still builds
# everything.

# _pccl_collect_targets(DIR OUT): the buildsystem targets of DIR and of every directory below it.
function(_pccl_collect_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _pccl_collect_targets("${sub}" sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

_pccl_collect_targets("${PROJECT_SOURCE_DIR}" _pccl_all_targets)
get_property(_pccl_unit_tests GLOBAL PROPERTY PCCL_UNIT_TEST_TARGETS)
set(_pccl_release_targets "")
foreach(target IN LISTS _pccl_all_targets)
  get_target_property(type ${target} TYPE)
  get_target_property(excluded ${target} EXCLUDE_FROM_ALL)
  if(type MATCHES "^(INTERFACE_LIBRARY|UTILITY)$" OR excluded OR target IN_LIST _pccl_unit_tests)
    continue()
  endif()
  list(APPEND _pccl_release_targets ${target})
endforeach()
add_custom_target(pccl-release-suite)
if(_pccl_release_targets)
  add_dependencies(pccl-release-suite ${_pccl_release_targets})
endif()
