// STRATA_CHECK_MPI: turns a failed MPI call into strata::Error("[comm] ...") naming the call,
// MPI's own error text, file and line (our communicators use MPI_ERRORS_RETURN).
#pragma once

#include <mpi.h>

#include <string>

#include "framework/core/error.hpp"

namespace strata::parallel::mpi {

// MPI's text for an error code: "MPI_ERR_TRUNCATE: message truncated".
std::string error_string(int code);

}  // namespace strata::parallel::mpi

#define STRATA_CHECK_MPI(call)                                                        \
  do {                                                                                \
    const int rc_ = (call);                                                           \
    if (rc_ != MPI_SUCCESS) [[unlikely]]                                              \
      ::strata::fail("comm", "{} failed: {} ({}:{})", #call,                          \
                     ::strata::parallel::mpi::error_string(rc_), __FILE__, __LINE__); \
  } while (0)
