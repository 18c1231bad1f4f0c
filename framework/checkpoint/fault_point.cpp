#include "framework/checkpoint/fault_point.hpp"

#include <signal.h>

#include <array>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>

#include "framework/core/error.hpp"

namespace strata::checkpoint {

namespace {

constexpr std::array<std::string_view, 7> kPoints = {
    "before_rank_file", "rank_file_tmp",  "after_rank_file", "before_manifest",
    "manifest_tmp",     "after_manifest", "after_latest"};

struct Fault {
  std::string point;
  std::int64_t step = 0;
  std::optional<int> rank;
};

template <typename T>
bool parse_number(std::string_view s, T& out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc{} && r.ptr == s.data() + s.size() && out >= 0;
}

std::optional<Fault> parse(std::string_view v) {
  Fault f;
  const auto a = v.find('@');
  if (a == std::string_view::npos) return std::nullopt;
  f.point = std::string(v.substr(0, a));
  std::string_view rest = v.substr(a + 1);
  const auto b = rest.find('@');
  if (!parse_number(rest.substr(0, b), f.step)) return std::nullopt;
  if (b != std::string_view::npos) {
    int r = 0;
    if (!parse_number(rest.substr(b + 1), r)) return std::nullopt;
    f.rank = r;
  }
  for (auto p : kPoints)
    if (p == f.point) return f;
  return std::nullopt;
}

}  // namespace

void fault_point(std::string_view point, std::int64_t step, int rank) {
  static const char* env = std::getenv("STRATA_CHECKPOINT_FAULT");
  if (!env || !*env) return;
  static const std::optional<Fault> fault = parse(env);
  if (!fault)
    user_fail("checkpoint",
              "STRATA_CHECKPOINT_FAULT='{}': expected POINT@STEP or POINT@STEP@RANK, POINT one of "
              "before_rank_file, rank_file_tmp, after_rank_file, before_manifest, manifest_tmp, "
              "after_manifest, after_latest",
              env);
  if (fault->point == point && fault->step == step && (!fault->rank || *fault->rank == rank))
    ::raise(SIGKILL);
}

}  // namespace strata::checkpoint
