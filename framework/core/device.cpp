#include "framework/core/device.hpp"

#include "framework/core/error.hpp"

#include <charconv>

namespace strata {

std::string Device::str() const {
  if (is_meta()) return "meta";
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index);
}

Device parse_device(std::string_view s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.starts_with("cuda:")) {
    int i = -1;
    auto r = std::from_chars(s.data() + 5, s.data() + s.size(), i);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size() && i >= 0) return Device::cuda(i);
  }
  user_fail("core", "unknown device '{}' (expected cpu, cuda or cuda:N)", s);
}

}  // namespace strata
