# Finds Strata's dependencies and records what was found for the configure summary.
include(CheckLanguage)
find_package(PkgConfig)

set(STRATA_SUMMARY "")
macro(strata_summary name found detail)
  if(${found})
    list(APPEND STRATA_SUMMARY "  ✓ ${name} ${detail}")
  else()
    list(APPEND STRATA_SUMMARY "  ✗ ${name} ${detail}")
  endif()
endmacro()

# Required: threads, fmt, nlohmann-json.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
strata_summary("fmt" fmt_FOUND "${fmt_VERSION}")
strata_summary("nlohmann-json" nlohmann_json_FOUND "${nlohmann_json_VERSION}")
find_package(CLI11 CONFIG REQUIRED)
strata_summary("CLI11" CLI11_FOUND "${CLI11_VERSION}")

# MPI (Open MPI) — the CPU transport.
find_package(MPI REQUIRED COMPONENTS CXX)
strata_summary("MPI" MPI_FOUND "${MPI_CXX_VERSION} (${MPIEXEC_EXECUTABLE})")
find_program(STRATA_MPIEXEC NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})

# HDF5 (C API) — checkpoints.
find_package(HDF5 REQUIRED COMPONENTS C)
strata_summary("HDF5" HDF5_FOUND "${HDF5_VERSION}")

# BLAS — CPU matmul. Prefer OpenBLAS (cblas.h).
set(BLA_VENDOR OpenBLAS)
find_package(BLAS)
if(NOT BLAS_FOUND)
  unset(BLA_VENDOR)
  find_package(BLAS REQUIRED)
endif()
find_path(STRATA_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas openblas-pthread REQUIRED)
strata_summary("BLAS" BLAS_FOUND "${BLAS_LIBRARIES}")

# PCRE2 — Unicode classes of GPT-2's pre-tokenization regex (strata data prepare --tokenizer gpt2).
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
strata_summary("PCRE2" PCRE2_FOUND "${PCRE2_VERSION}")

# io_uring — NVMe tier.
pkg_check_modules(URING IMPORTED_TARGET liburing)
strata_summary("io_uring" URING_FOUND "${URING_VERSION}")

# CUDA — AUTO: use it when a toolkit is found; ON: required; OFF: never.
set(STRATA_HAVE_CUDA OFF)
if(NOT STRATA_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # sm_75 (T4: Colab, Kaggle), sm_80 (A100), sm_90 (H100, H200).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 75 80 90)
    endif()
    enable_language(CUDA)
    # CUDA sources take the C++ standard (20); CMake 3.25 does not know nvcc's flag for it.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(STRATA_HAVE_CUDA ON)
    endif()
  endif()
  if(STRATA_WITH_CUDA STREQUAL "ON" AND NOT STRATA_HAVE_CUDA)
    message(FATAL_ERROR "STRATA_WITH_CUDA=ON but no CUDA toolkit was found "
                        "(install it or configure with -DSTRATA_WITH_CUDA=AUTO/OFF)")
  endif()
endif()
strata_summary("CUDA" STRATA_HAVE_CUDA "${CUDAToolkit_VERSION}")

# NCCL — device-buffer transport; needs CUDA.
set(STRATA_HAVE_NCCL OFF)
if(NOT STRATA_WITH_NCCL STREQUAL "OFF" AND STRATA_HAVE_CUDA)
  find_package(NCCL)
  if(NCCL_FOUND)
    set(STRATA_HAVE_NCCL ON)
  endif()
endif()
if(STRATA_WITH_NCCL STREQUAL "ON" AND NOT STRATA_HAVE_NCCL)
  message(FATAL_ERROR "STRATA_WITH_NCCL=ON but NCCL (or CUDA) was not found "
                      "(install NCCL or configure with -DSTRATA_WITH_NCCL=AUTO/OFF)")
endif()
strata_summary("NCCL" STRATA_HAVE_NCCL "${NCCL_VERSION}")

if(STRATA_BUILD_TESTS)
  find_package(GTest REQUIRED)
  strata_summary("GoogleTest" GTest_FOUND "")
endif()
if(STRATA_BUILD_BENCH)
  find_package(benchmark QUIET)
  strata_summary("Google Benchmark" benchmark_FOUND "${benchmark_VERSION}")
endif()

function(strata_print_summary)
  message(STATUS "")
  message(STATUS "Strata ${PROJECT_VERSION} (${CMAKE_BUILD_TYPE}) dependency summary:")
  foreach(line IN LISTS STRATA_SUMMARY)
    message(STATUS "${line}")
  endforeach()
  if(STRATA_SANITIZER STREQUAL "address")
    message(STATUS "  sanitizers: address, undefined")
  elseif(STRATA_SANITIZER STREQUAL "thread")
    message(STATUS "  sanitizers: thread")
  endif()
  message(STATUS "")
endfunction()
