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

std::int64_t SliceLayout::extent_end() const {
  if (!strided()) return end;
  return begin + (numel() / run - 1) * stride + run;
}

std::string SliceLayout::error(std::int64_t numel_whole) const {
  if (!(0 <= begin && begin < end))
    return fmt::format("slice {} is empty or outside [0, {})", str(), numel_whole);
  if (run < 0 || (run > 0 && (stride < run || numel() % run != 0)))
    return fmt::format("slice {} is not whole rows of {} at least {} apart", str(), run, run);
  if (extent_end() > numel_whole)
    return fmt::format("slice {} is outside [0, {})", str(), numel_whole);
  return "";
}

std::pair<std::int64_t, std::int64_t> SliceLayout::locate(std::int64_t pos) const {
  if (!strided()) {
    if (begin <= pos && pos < end) return {pos - begin, end - pos};
    return {-1, 0};
  }
  if (pos < begin) return {-1, 0};
  const std::int64_t row = (pos - begin) / stride, col = (pos - begin) % stride;
  if (row >= numel() / run || col >= run) return {-1, 0};
  return {row * run + col, run - col};
}

std::string SliceLayout::str() const {
  if (!strided()) return fmt::format("[{}, {})", begin, end);
  return fmt::format("[{}, +{}) in rows of {} every {}", begin, numel(), run, stride);
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
  if (const std::string e = layout_of(s).error(numel); !e.empty())
    fail("checkpoint", "{}: {} {}: {}", where, s.kind, s.name, e);
  if (s.data == nullptr) fail("checkpoint", "{}: slice {} {} has no data", where, s.kind, s.name);
}

}  // namespace strata::checkpoint
