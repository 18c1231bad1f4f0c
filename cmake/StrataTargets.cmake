# Helpers that declare Strata's libraries, tests and benchmarks with common flags.
add_library(strata_flags INTERFACE)
# Warnings for Strata's own code only (BUILD_INTERFACE: not for a program built against an
# installed Strata). __FILE__ (the check macros' messages) relative to the source root, so no
# library names a path of the build machine (an installed Strata can be moved: StrataInstall.cmake).
target_compile_options(strata_flags INTERFACE
  $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>>
  $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CXX>:-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>>
  $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>>)
target_include_directories(strata_flags INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<INSTALL_INTERFACE:include>)
# STRATA_BUILD_FUZZERS (clang only, by hand): coverage for libFuzzer in every target
# (tests/fuzz/README.md).
if(STRATA_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "STRATA_BUILD_FUZZERS=ON needs clang (CC=clang CXX=clang++)")
  endif()
  target_compile_options(strata_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer>)
  target_link_options(strata_flags INTERFACE -fsanitize=address)
endif()
if(STRATA_SANITIZER)  # cmake/StrataSanitize.cmake
  target_compile_options(strata_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:${STRATA_SANITIZE_FLAGS} -fno-omit-frame-pointer>)
  target_link_options(strata_flags INTERFACE ${STRATA_SANITIZE_FLAGS})
endif()

# STRATA_UNITY_BUILD (default ON): every target's sources are compiled in batches of
# STRATA_UNITY_BATCH, one translation unit per batch, so the headers every file includes (fmt,
# nlohmann-json, CLI11, gtest, the standard library) are parsed once per batch instead of once per
# file: a clean build takes about half the time. -DSTRATA_UNITY_BUILD=OFF compiles file by file
# (what an edit-compile loop on one file wants). Files built with their own flags (the AVX2/AVX-512
# kernels) or whose file-local names clash with another file's are never batched
# (SKIP_UNITY_BUILD_INCLUSION where they are declared).
option(STRATA_UNITY_BUILD "compile each target's sources in batches (faster clean builds)" ON)
set(STRATA_UNITY_BATCH 16 CACHE STRING "source files per unity batch")
if(STRATA_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE ${STRATA_UNITY_BATCH})
endif()

# strata_add_library(NAME DIRS dir... DEPS dep...): a static library of every *.cpp in DIRS
# (and *.cu when CUDA is on).
function(strata_add_library name)
  cmake_parse_arguments(A "" "" "DIRS;SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(srcs ${A_SOURCES})
  foreach(d IN LISTS A_DIRS)
    file(GLOB s CONFIGURE_DEPENDS ${d}/*.cpp)
    list(APPEND srcs ${s})
  endforeach()
  if(srcs)
    add_library(${name} STATIC ${srcs})
    target_link_libraries(${name} PUBLIC strata_flags ${A_DEPS} PRIVATE ${A_PRIVATE_DEPS})
  else()  # a folder whose sources have not landed yet
    add_library(${name} INTERFACE)
    target_link_libraries(${name} INTERFACE strata_flags ${A_DEPS})
  endif()
endfunction()

# Labels the tests a gtest_discover_tests(... TEST_LIST list_var) call finds, when ctest runs.
function(_strata_label_discovered list_var labels)
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${list_var}_labels.cmake)
  file(WRITE ${script}
    "if(${list_var})\n  set_tests_properties(\${${list_var}} PROPERTIES LABELS \"${labels}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()

# strata_add_gtest(NAME DIRS dir... DEPS dep... [GPU_TESTS filter]): a gtest executable, each test
# a ctest entry; the tests GPU_TESTS (a --gtest_filter pattern) matches also carry the label cuda.
function(strata_add_gtest name)
  cmake_parse_arguments(A "" "GPU_TESTS" "DIRS;SOURCES;DEPS;LABELS" ${ARGN})
  set(srcs ${A_SOURCES})
  foreach(d IN LISTS A_DIRS)
    file(GLOB s CONFIGURE_DEPENDS ${d}/*.cpp)
    list(APPEND srcs ${s})
  endforeach()
  add_executable(${name} ${srcs})
  target_link_libraries(${name} PRIVATE strata_flags GTest::gtest GTest::gtest_main ${A_DEPS})
  target_compile_definitions(${name} PRIVATE
    STRATA_SOURCE_DIR="${PROJECT_SOURCE_DIR}" STRATA_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # Passive OpenMP waits: a test's threads sleep instead of spinning when the machine is busy
  # (spinning threads starve each other: 20x slower under load, no faster on a quiet machine
  # at these sizes).
  # The labels are set by a script ctest includes after the discovered tests: gtest_discover_tests
  # flattens a list-valued property (LABELS "unit;cuda" would label the tests "unit" only).
  set(labels unit ${A_LABELS})
  set(filter "")
  if(A_GPU_TESTS)
    set(filter TEST_FILTER "-${A_GPU_TESTS}")
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_FILTER "${A_GPU_TESTS}"
      TEST_LIST ${name}_gpu_tests PROPERTIES ENVIRONMENT "OMP_WAIT_POLICY=passive")
    _strata_label_discovered(${name}_gpu_tests "${labels};cuda")
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 ${filter} TEST_LIST ${name}_tests
    PROPERTIES ENVIRONMENT "OMP_WAIT_POLICY=passive")
  _strata_label_discovered(${name}_tests "${labels}")
endfunction()

# strata_add_mpi_test(NAME EXE NP n [ARGS ...]): run EXE under mpirun -np n --oversubscribe.
function(strata_add_mpi_test name exe)
  cmake_parse_arguments(A "" "NP;TIMEOUT" "ARGS;LABELS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  add_test(NAME ${name}
    COMMAND ${STRATA_MPIEXEC} --oversubscribe --bind-to none -np ${A_NP} $<TARGET_FILE:${exe}> ${A_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "dist;${A_LABELS}"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMP_NUM_THREADS=1;OMP_WAIT_POLICY=passive")
endfunction()
include(GoogleTest)
