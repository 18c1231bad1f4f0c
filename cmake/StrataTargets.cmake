# Helpers that declare Strata's libraries, tests and benchmarks with common flags.
add_library(strata_flags INTERFACE)
target_compile_options(strata_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
target_include_directories(strata_flags INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<INSTALL_INTERFACE:include>)
if(STRATA_SANITIZE)
  target_compile_options(strata_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer>)
  target_link_options(strata_flags INTERFACE -fsanitize=address,undefined)
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

# strata_add_gtest(NAME DIRS dir... DEPS dep...): a gtest executable, each test a ctest entry.
function(strata_add_gtest name)
  cmake_parse_arguments(A "" "" "DIRS;SOURCES;DEPS;LABELS" ${ARGN})
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
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "unit;${A_LABELS}"
    ENVIRONMENT "OMP_WAIT_POLICY=passive")
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
