#include "framework/memory/tier.hpp"

#include "framework/core/error.hpp"

namespace strata {

std::string_view tier_name(Tier t) {
  switch (t) {
    case Tier::device: return "device";
    case Tier::host: return "host";
    case Tier::nvme: return "nvme";
  }
  return "?";
}

std::string_view category_name(Category c) {
  switch (c) {
    case Category::params: return "params";
    case Category::grads: return "grads";
    case Category::optimizer: return "optimizer";
    case Category::activations: return "activations";
    case Category::comm: return "comm buffers";
    case Category::workspace: return "workspace";
    case Category::other: return "other";
  }
  return "?";
}


}  // namespace strata
