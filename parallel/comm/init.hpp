// Starting and ending communication for the process: init_world() picks the transport (MPI
// under a launcher, local when run alone) and never silently falls back to one rank; World
// does the same as an RAII object that finalizes at scope exit.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "parallel/comm/group.hpp"

namespace strata::parallel {

struct InitOptions {
  // "auto": MPI when started by a launcher (mpirun, srun, `strata run`), local otherwise;
  // "mpi": MPI even when run alone (a singleton world); "local": one rank, no MPI.
  std::string transport = "auto";
  // Require a launcher: a program run without one is an error instead of a 1-rank world.
  bool strict = false;
  // The number of ranks the job must have (e.g. from `strata run -n`); a mismatch is an error.
  std::optional<int> expected_size;
  // Default wait timeout of every group (strata.comm.timeout_s); unset: $STRATA_COMM_TIMEOUT_S
  // (seconds) or 300 s.
  std::optional<std::chrono::milliseconds> timeout;
  // Check that every rank posts the same collective (see Group::set_validate); unset:
  // $STRATA_COMM_VALIDATE=1 turns it on.
  std::optional<bool> validate;
  // How long a waiting thread (and the progress thread) poll MPI before sleeping.
  std::chrono::milliseconds spin{200};
};

// The world group of this process, initialising the transport on the first call (later calls
// return the same group). Throws strata::Error when the launched world cannot be formed.
// MPI: initialised with MPI_THREAD_MULTIPLE unless the program already initialised it (then at
// least MPI_THREAD_SERIALIZED is required, and your own MPI calls must not run concurrently
// with Strata's progress thread unless it is MULTIPLE). Before MPI_Init, Strata selects Open
// MPI's Rabenseifner non-blocking all-reduce (OMPI_MCA_coll_libnbc_iallreduce_algorithm=3)
// unless the variable is already set: the default binomial tree is ~1.5x slower on large or
// in-place buffers.
Group init_world(const InitOptions& options = {});
// Ends the transport (waits a bounded time for calls in flight, stops the progress thread,
// MPI_Finalize if Strata initialised MPI). Groups that outlive it throw on use. Idempotent.
void finalize_world();

// Ends the transport after an error without MPI_Finalize (which would wait for every other
// rank): the process then exits non-zero and mpirun ends the whole job at once.
void abandon_world();

// RAII: init_world() on construction, finalize_world() on destruction — except when the
// destructor runs because an exception is propagating: then MPI is not finalized (that would
// wait for the other ranks), so the failing rank exits and mpirun ends the job.
class World {
 public:
  explicit World(const InitOptions& options = {});
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  const Group& group() const { return group_; }

 private:
  Group group_;
};

}  // namespace strata::parallel
