// NCCL transport stub for builds without NCCL: reports why device buffers cannot communicate.
#include "framework/core/error.hpp"
#include "parallel/comm/transports.hpp"

namespace strata::parallel::nccl {

bool is_available() {
  return false;
}

std::string unavailable_reason() {
  return "this Strata build has no NCCL (configure with -DSTRATA_WITH_NCCL=ON where NCCL and "
         "the CUDA toolkit are installed), or move the buffers to the CPU";
}

std::shared_ptr<CommImpl> init(int, int, int, const std::function<void(void*, std::size_t)>&,
                               std::shared_ptr<SeqTracker>) {
  user_fail("comm", "{}", unavailable_reason());
}

}  // namespace strata::parallel::nccl
