#include "framework/checkpoint/space.hpp"

#include <sys/statvfs.h>

#include <fmt/format.h>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/memory/size.hpp"

namespace strata::checkpoint {

std::optional<std::uint64_t> free_bytes(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

void no_space(const std::string& dir, const std::string& what, std::uint64_t need, bool at_least) {
  const auto free = free_bytes(dir);
  throw NoSpaceError(
      dir, fmt::format("no space left on the file system of '{}' for {}: it needs {}{} ({} "
                       "bytes), {} free; free some space there or write somewhere else",
                       dir, what, at_least ? "at least " : "", format_bytes(need), need,
                       free ? format_bytes(*free) + " are" : std::string("an unknown amount is")));
}

void require_space(const std::string& dir, const std::string& what, std::uint64_t need) {
  const auto free = free_bytes(dir);
  if (free && *free < need) no_space(dir, what, need, false);
}

}  // namespace strata::checkpoint
