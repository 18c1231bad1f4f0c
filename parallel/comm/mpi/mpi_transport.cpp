// The MPI transport's entry points: is_available() and init().
#include "parallel/comm/mpi/mpi_check.hpp"
#include "parallel/comm/mpi/mpi_comm.hpp"
#include "parallel/comm/transports.hpp"

namespace strata::parallel::mpi {

bool is_available() {
  return true;
}

WorldTransport init(const MpiOptions& options, std::shared_ptr<SeqTracker> tracker) {
  auto rt = Runtime::acquire(options.spin);
  MPI_Comm comm = MPI_COMM_NULL, ctrl = MPI_COMM_NULL;
  {
    auto lk = rt->lock();
    STRATA_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    STRATA_CHECK_MPI(MPI_Comm_dup(comm, &ctrl));
  }
  WorldTransport wt;
  wt.comm = MpiComm::create(rt, comm, ctrl, std::move(tracker));
  wt.shutdown = [rt] { rt->shutdown(std::chrono::seconds(10)); };
  return wt;
}

void abandon() { Runtime::abandon_mpi(); }

}  // namespace strata::parallel::mpi
