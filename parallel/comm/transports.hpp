// The transports behind Group. Each exports is_available() and init() (MPI also abandon(), NCCL
// also unavailable_reason()); the build picks nccl/ or no_nccl/ (stub) sources, so no caller
// needs an #ifdef. `staged` is a wrapper: device buffers through a host transport.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "parallel/comm/comm_impl.hpp"

namespace strata::parallel {

// A world communicator and how to end the transport for the whole process.
struct WorldTransport {
  std::shared_ptr<CommImpl> comm;
  std::function<void()> shutdown;  // idempotent; later calls on any communicator throw
};

struct MpiOptions {
  std::chrono::milliseconds spin{200};  // how long a waiter/progress thread polls before sleeping
};

namespace mpi {
// True when the MPI library can be used (always, in this build: MPI is a required dependency).
bool is_available();
// Initialises MPI (MPI_THREAD_MULTIPLE) unless the program already did, starts the progress
// thread and returns MPI_COMM_WORLD (duplicated). Throws if MPI cannot be initialised.
WorldTransport init(const MpiOptions& options, std::shared_ptr<SeqTracker> tracker);
// Makes the transport's shutdown skip MPI_Finalize (leaving after an error).
void abandon();
}  // namespace mpi

namespace local {
bool is_available();  // always
// The size-1 communicator for a program run without a launcher: collectives are copies.
std::shared_ptr<CommImpl> init(std::shared_ptr<SeqTracker> tracker);
}  // namespace local

namespace nccl {
// True when NCCL is compiled in and a GPU is visible.
bool is_available();
// Why is_available() is false (for error messages); empty when it is true.
std::string unavailable_reason();
// A communicator over `size` ranks on GPU `device`; `bcast_id(data, bytes)` broadcasts the
// NCCL unique id from rank 0 over the host transport.
std::shared_ptr<CommImpl> init(int rank, int size, int device,
                               const std::function<void(void*, std::size_t)>& bcast_id,
                               std::shared_ptr<SeqTracker> tracker);
}  // namespace nccl

namespace staged {
// Device buffers over a host transport (ranks that share a GPU, or no NCCL): each call copies its
// device input into a staging buffer in pinned host memory (queued on the caller's current stream
// of GPU `device`, waited for), runs `host`'s call on the staging buffers, and copies the result
// into the device buffer before the Work completes — before wait() returns; the Work has no
// device event, so Work::wait_on waits on the host too. Tags, validation and stall explanations
// are the host transport's.
std::shared_ptr<CommImpl> init(std::shared_ptr<CommImpl> host, int device);
// Test hook: the same staging for CPU buffers (plain host staging buffers, memcpy), so that the
// wrapper's logic runs without a GPU.
std::shared_ptr<CommImpl> init_for_cpu_buffers(std::shared_ptr<CommImpl> host);
}  // namespace staged

}  // namespace strata::parallel
