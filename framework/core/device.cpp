#include "framework/core/device.hpp"

#include "framework/core/error.hpp"


namespace strata {

std::string Device::str() const {
  if (is_meta()) return "meta";
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index);
}


}  // namespace strata
