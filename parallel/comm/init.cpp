#include "parallel/comm/init.hpp"

#include <cstdlib>
#include <exception>
#include <mutex>
#include <numeric>
#include <string_view>
#include <thread>

#include "framework/core/error.hpp"
#include "parallel/comm/group_state.hpp"
#include "parallel/comm/launch.hpp"
#include "parallel/comm/transports.hpp"

namespace strata::parallel {

namespace {

struct WorldSlot {
  std::mutex mu;
  Group group;
  std::function<void()> shutdown;
  bool finalized = false;
};

WorldSlot& slot() {
  static WorldSlot s;
  return s;
}

std::chrono::milliseconds default_timeout(const InitOptions& o) {
  if (o.timeout) {
    if (o.timeout->count() <= 0)
      user_fail("comm", "the communication timeout must be positive, got {} ms",
                o.timeout->count());
    return *o.timeout;
  }
  if (const char* v = std::getenv("STRATA_COMM_TIMEOUT_S")) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(s > 0))
      user_fail("comm", "STRATA_COMM_TIMEOUT_S='{}' is not a positive number of seconds", v);
    return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000.0 + 0.5));
  }
  return std::chrono::seconds(300);
}

bool default_validate(const InitOptions& o) {
  if (o.validate) return *o.validate;
  const char* v = std::getenv("STRATA_COMM_VALIDATE");
  return v && std::string_view(v) != "0" && std::string_view(v) != "";
}

// How long a waiting thread drives MPI progress itself before sleeping. Spinning pays off only
// when every rank has a core: with more ranks on this node than cores (mpirun --oversubscribe,
// as in the tests on 2 cores) a spinning waiter steals the core a peer needs to reach the
// collective, so then it yields at once (Open MPI's mpi_yield_when_idle makes the same choice).
// STRATA_COMM_SPIN_MS overrides.
std::chrono::milliseconds default_spin(const InitOptions& o) {
  if (const char* v = std::getenv("STRATA_COMM_SPIN_MS")) {
    char* end = nullptr;
    const long ms = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || ms < 0)
      user_fail("comm", "STRATA_COMM_SPIN_MS='{}' is not a non-negative number of milliseconds", v);
    return std::chrono::milliseconds(ms);
  }
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const unsigned cores = std::thread::hardware_concurrency();
  if (local && cores > 0 && std::strtol(local, nullptr, 10) > static_cast<long>(cores))
    return std::chrono::milliseconds(0);
  return o.spin;
}

}  // namespace

Group init_world(const InitOptions& o) {
  WorldSlot& s = slot();
  std::lock_guard lk(s.mu);
  if (s.group.valid()) return s.group;
  if (s.finalized)
    fail("comm", "init_world() after finalize_world(): MPI cannot be started twice in a process");
  const auto timeout = default_timeout(o);
  const bool validate = default_validate(o);
  const LaunchInfo launch = detect_launch();

  std::string transport = o.transport;
  if (transport == "auto") {
    if (launch.under_launcher) {
      transport = "mpi";
    } else if (o.strict) {
      user_fail("comm",
                "strict initialisation: this program was not started by a launcher "
                "(mpirun, srun, `strata run`), so it cannot join a multi-rank world. Start it "
                "with `mpirun -np N ...`, or drop strict to run on one rank");
    } else {
      transport = "local";
    }
  }
  auto st = std::make_shared<GroupState>();
  st->tracker = std::make_shared<SeqTracker>(0);
  if (transport == "mpi") {
    if (!mpi::is_available()) fail("comm", "the MPI transport is not available in this build");
    WorldTransport wt = mpi::init(MpiOptions{default_spin(o)}, st->tracker);
    try {
      check_world_size(launch, o.expected_size, wt.comm->size());
    } catch (...) {
      wt.comm.reset();
      wt.shutdown();
      s.finalized = true;
      throw;
    }
    st->host = std::move(wt.comm);
    s.shutdown = std::move(wt.shutdown);
  } else if (transport == "local") {
    if (launch.under_launcher)
      user_fail("comm",
                "transport 'local' requested, but this process was started by a "
                "launcher ({}): refusing to run as a 1-rank world inside a multi-rank job",
                launch.evidence);
    if (o.strict)
      user_fail("comm", "strict initialisation cannot use the local (1-rank) transport");
    check_world_size(launch, o.expected_size, 1);
    st->host = local::init(st->tracker);
    st->device_via_host = true;
  } else {
    user_fail("comm", "unknown transport '{}' (use auto, mpi or local)", o.transport);
  }
  st->info.name = "world";
  st->info.world_ranks.resize(static_cast<std::size_t>(st->host->size()));
  std::iota(st->info.world_ranks.begin(), st->info.world_ranks.end(), 0);
  st->desc = st->info.describe();
  st->timeout_ms.store(timeout.count());
  st->validate.store(validate);
  s.group = Group(st);
  return s.group;
}

void finalize_world() {
  WorldSlot& s = slot();
  std::function<void()> shutdown;
  {
    std::lock_guard lk(s.mu);
    if (!s.group.valid() && !s.shutdown) return;
    s.group = Group();
    shutdown = std::move(s.shutdown);
    s.shutdown = nullptr;
    if (shutdown) s.finalized = true;  // MPI cannot be initialised again; local can
  }
  if (shutdown) shutdown();
}

void abandon_world() {
  mpi::abandon();
  finalize_world();
}

World::World(const InitOptions& options) : group_(init_world(options)) {}

World::~World() {
  group_ = Group();
  // Leaving because of an error: do not finalize. MPI_Finalize waits for every other rank (Open
  // MPI 4.1), so a failed rank would hang there; exiting without it makes mpirun notice the
  // failure and take the whole job down at once.
  if (std::uncaught_exceptions() > 0) {
    try {
      abandon_world();
    } catch (...) {
    }
    return;
  }
  try {
    finalize_world();
  } catch (...) {
    // A destructor must not throw; finalize_world reports nothing worth dying for here.
  }
}

}  // namespace strata::parallel
