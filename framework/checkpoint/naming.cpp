#include "framework/checkpoint/naming.hpp"

#include <fmt/format.h>

#include <charconv>

namespace strata::checkpoint {

namespace {

template <typename T>
std::optional<T> parse_number_after(std::string_view name, std::string_view prefix,
                                    std::string_view suffix, std::size_t min_digits) {
  if (name.size() < prefix.size() + suffix.size() + min_digits) return std::nullopt;
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  if (name.substr(name.size() - suffix.size()) != suffix) return std::nullopt;
  const std::string_view digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  for (char c : digits)
    if (c < '0' || c > '9') return std::nullopt;
  T v{};
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (r.ec != std::errc{} || r.ptr != digits.data() + digits.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string step_dir_name(std::int64_t step) {
  return fmt::format("step_{:08d}", step);
}

std::optional<std::int64_t> parse_step_dir_name(std::string_view name) {
  return parse_number_after<std::int64_t>(name, "step_", "", 8);
}

std::string rank_file_name(int rank) {
  return fmt::format("rank_{:05d}.h5", rank);
}

std::optional<int> parse_rank_file_name(std::string_view name) {
  return parse_number_after<int>(name, "rank_", ".h5", 5);
}

std::string join_path(const std::string& dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return dir + std::string(name);
  return dir + "/" + std::string(name);
}

}  // namespace strata::checkpoint
