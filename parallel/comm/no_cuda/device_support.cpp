// device_support.hpp for builds without CUDA: no GPU has an identity, and nothing can be copied.
#include "parallel/comm/device_support.hpp"

#include "framework/core/error.hpp"

namespace strata::parallel::device_support {

DeviceIdentity identify(int) {
  return {};
}

std::string describe(const DeviceIdentity&) {
  return "an unknown GPU";
}

void copy_and_wait(void*, const void*, std::size_t, bool, int, void*) {
  fail("comm", "a copy between host and GPU memory was asked of a Strata build without CUDA");
}

}  // namespace strata::parallel::device_support
