# `cmake --install`: the libraries, the public headers under one include root (<strata/...>), the
# `strata` command and train_gpt, and a relocatable CMake package — find_package(Strata) gives
# Strata::strata (and the finer Strata::core, Strata::nn, Strata::parallel, ...) with its
# dependencies found again through find_dependency — plus strata.pc for pkg-config. Nothing
# installed names a path of the build machine (tests/e2e/install.sh checks it). docs/api.md.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(STRATA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Strata)

# strata/version.hpp: the same number as `strata version` and the package version.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.hpp.in
  ${PROJECT_BINARY_DIR}/include/strata/version.hpp @ONLY)

# Strata::strata: everything a model and its training need (docs/api.md).
add_library(strata_api INTERFACE)
target_link_libraries(strata_api INTERFACE strata_framework strata_offload strata_parallel)
target_include_directories(strata_api INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)

set(_strata_export strata_flags strata_core strata_cpu strata_hparams strata_config strata_optim strata_data
  strata_ops strata_nn strata_train strata_checkpoint strata_framework strata_offload strata_comm
  strata_parallel strata_api)
if(TARGET strata_cuda_ops)
  list(APPEND _strata_export strata_cuda_ops)
endif()
foreach(_t IN LISTS _strata_export)
  string(REGEX REPLACE "^strata_" "" _name ${_t})
  if(_t STREQUAL "strata_api")
    set(_name strata)
  endif()
  set_target_properties(${_t} PROPERTIES EXPORT_NAME ${_name})
endforeach()
install(TARGETS ${_strata_export} EXPORT StrataTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT StrataTargets NAMESPACE Strata:: DESTINATION ${STRATA_INSTALL_CMAKEDIR})

# The programs. Strata's libraries are static; $ORIGIN/../lib is where any shared one would be.
set_target_properties(strata train_gpt PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS strata train_gpt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The headers: include/strata/*.hpp and what they include, transitively (StrataInstallHeaders.cmake).
file(GLOB _strata_public RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/include/strata/*.hpp)
install(CODE "set(STRATA_HEADERS_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
set(STRATA_HEADERS_PUBLIC \"${_strata_public}\")
set(STRATA_HEADERS_GENERATED \"${PROJECT_BINARY_DIR}/include/strata/version.hpp\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/StrataInstallHeaders.cmake)

# The package: StrataConfig.cmake finds the dependencies again, then includes StrataTargets.cmake.
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/StrataConfig.cmake.in
  ${PROJECT_BINARY_DIR}/StrataConfig.cmake INSTALL_DESTINATION ${STRATA_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/StrataConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/StrataConfig.cmake ${PROJECT_BINARY_DIR}/StrataConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake DESTINATION ${STRATA_INSTALL_CMAKEDIR})

# strata.pc: the static libraries in link order, then what they need as -L/-l flags.
set(STRATA_PC_LIBS "-L\${libdir}")
foreach(_l parallel comm offload train checkpoint data nn ops cuda_ops optim config hparams cpu core)
  if(TARGET strata_${_l})
    string(APPEND STRATA_PC_LIBS " -lstrata_${_l}")
  endif()
endforeach()
set(STRATA_PC_CFLAGS "")
set(_pc_libs ${MPI_CXX_LIBRARIES} ${HDF5_C_LIBRARIES} ${BLAS_LIBRARIES})
set(_pc_includes ${MPI_CXX_INCLUDE_DIRS} ${HDF5_C_INCLUDE_DIRS})
if(STRATA_HAVE_CUDA)
  string(APPEND STRATA_PC_CFLAGS " -DSTRATA_HAVE_CUDA=1")
  list(APPEND _pc_libs ${CUDA_cudart_LIBRARY} ${CUDA_cublasLt_LIBRARY})
  list(APPEND _pc_includes ${CUDAToolkit_INCLUDE_DIRS})
endif()
if(STRATA_HAVE_NCCL)
  list(APPEND _pc_libs ${NCCL_LIBRARY})
  list(APPEND _pc_includes ${NCCL_INCLUDE_DIR})
endif()
list(REMOVE_DUPLICATES _pc_includes)
foreach(_i IN LISTS _pc_includes)
  string(APPEND STRATA_PC_CFLAGS " -I${_i}")
endforeach()
set(_pc_dirs "")
set(_pc_names "")
foreach(_l IN LISTS _pc_libs)
  if(_l MATCHES "^(.*)/lib([^/]+)\\.(so|a)(\\.[0-9.]*)?$")
    list(APPEND _pc_dirs "-L${CMAKE_MATCH_1}")
    list(APPEND _pc_names "-l${CMAKE_MATCH_2}")
  elseif(_l MATCHES "^-")
    list(APPEND _pc_names "${_l}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _pc_dirs)
list(REMOVE_DUPLICATES _pc_names)
list(JOIN _pc_dirs " " _pc_dirs)
list(JOIN _pc_names " " _pc_names)
string(APPEND STRATA_PC_LIBS " ${_pc_dirs} ${_pc_names} -fopenmp -lpthread")
configure_file(${PROJECT_SOURCE_DIR}/cmake/strata.pc.in ${PROJECT_BINARY_DIR}/strata.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/strata.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
