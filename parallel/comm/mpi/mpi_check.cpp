#include "parallel/comm/mpi/mpi_check.hpp"

namespace strata::parallel::mpi {

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(len));
}

}  // namespace strata::parallel::mpi
