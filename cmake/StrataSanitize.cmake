# STRATA_SANITIZE: the sanitizers every Strata target is built with (scripts/test --sanitize;
# tests/sanitizers/README.md). OFF (default); address: AddressSanitizer + UBSan (the asan preset;
# ON, its old spelling, means the same); thread: ThreadSanitizer (the tsan preset). Sets
# STRATA_SANITIZER to "", "address" or "thread" for the rest of the build to test, and
# STRATA_SANITIZE_FLAGS to the compiler's -fsanitize flags.
string(TOLOWER "${STRATA_SANITIZE}" _strata_san)
if(_strata_san STREQUAL "" OR _strata_san MATCHES "^(off|no|false|0)$")
  set(STRATA_SANITIZER "")
elseif(_strata_san MATCHES "^(address|on)$")
  set(STRATA_SANITIZER address)
  set(STRATA_SANITIZE_FLAGS -fsanitize=address,undefined)
elseif(_strata_san STREQUAL "thread")
  set(STRATA_SANITIZER thread)
  set(STRATA_SANITIZE_FLAGS -fsanitize=thread)
else()
  message(FATAL_ERROR "STRATA_SANITIZE is '${STRATA_SANITIZE}': use OFF, address (ASan + UBSan) or thread (TSan)")
endif()
if(STRATA_SANITIZER STREQUAL "thread" AND STRATA_BUILD_FUZZERS)
  message(FATAL_ERROR "STRATA_SANITIZE=thread and STRATA_BUILD_FUZZERS=ON: the fuzzers bring AddressSanitizer, which cannot share a program with TSan; build them in a folder of their own")
endif()

# STRATA_TEST_TIMEOUT_SCALE: each ctest TIMEOUT is multiplied by this in a sanitizer build. Under
# ThreadSanitizer the multi-rank tests ran 10-15x slower than in Release on the 2-core machine
# (comm_dist_np2: 155 s against 11 s), past their timeouts; AddressSanitizer's runs stayed within
# them (tests/sanitizers/README.md).
if(STRATA_SANITIZER STREQUAL "thread")
  set(STRATA_TEST_TIMEOUT_SCALE 10)
else()
  set(STRATA_TEST_TIMEOUT_SCALE 1)
endif()
# Scales the TIMEOUT of every test the calling directory declared so far (call it last there:
# CMake 3.25 sets a test's properties only from the directory that added it).
function(strata_scale_test_timeouts)
  if(STRATA_TEST_TIMEOUT_SCALE EQUAL 1)
    return()
  endif()
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_t IN LISTS _tests)
    get_test_property(${_t} TIMEOUT _to)
    if(_to)
      math(EXPR _to "${_to} * ${STRATA_TEST_TIMEOUT_SCALE}")
      set_tests_properties(${_t} PROPERTIES TIMEOUT ${_to})
    endif()
  endforeach()
endfunction()
