#include "framework/checkpoint/slice.hpp"

#include "framework/core/error.hpp"

namespace strata::checkpoint {

std::string state_entry_name(std::string_view owner, std::string_view what) {
  std::string s(owner);
  s += kStateEntrySeparator;
  s += what;
  return s;
}

bool is_state_entry(std::string_view name) {
  return name.find(kStateEntrySeparator) != std::string_view::npos;
}

bool valid_kind(std::string_view kind) {
  if (kind.empty() || kind.size() > 64 || kind == "state") return false;  // /state holds rank state
  for (char c : kind)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

bool valid_param_name(std::string_view name) {
  if (name.empty() || name.size() > 1024 || name == "." || name == "..") return false;
  for (char c : name)
    if (c == '/' || static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

void validate_slice(const SliceRef& s, const std::string& where) {
  if (!valid_kind(s.kind))
    fail("checkpoint", "{}: invalid slice kind '{}' (lower-case letters, digits and '_')", where,
         s.kind);
  if (!valid_param_name(s.name))
    fail("checkpoint", "{}: invalid parameter name '{}' (non-empty, no '/')", where, s.name);
  for (auto d : s.global_shape.dims())
    if (d < 0)
      fail("checkpoint", "{}: {} has negative extent in shape {}", where, s.name,
           s.global_shape.str());
  const std::int64_t numel = s.global_shape.numel();
  if (!(0 <= s.begin && s.begin < s.end && s.end <= numel))
    fail("checkpoint", "{}: slice [{}, {}) of {} {} is empty or outside [0, {})", where, s.begin,
         s.end, s.kind, s.name, numel);
  if (s.data == nullptr) fail("checkpoint", "{}: slice {} {} has no data", where, s.kind, s.name);
}

}  // namespace strata::checkpoint
