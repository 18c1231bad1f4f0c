#include "framework/core/device.hpp"

#include "framework/core/error.hpp"


namespace strata {

std::string Device::str() const {
  if (is_meta()) return index == 1 ? "meta:cuda" : "meta";  // meta_device.hpp's flavours
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index);
}


}  // namespace strata
