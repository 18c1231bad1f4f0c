#include "framework/checkpoint/fault_point.hpp"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <cstdlib>
#include <fstream>
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

namespace {

// STRATA_CHECKPOINT_FAULT_FILE: a fault armed at run time. The file, when it exists, holds
// "POINT" or "POINT@RANK": the next save that reaches POINT (on RANK, or on any rank) kills the
// process. The process that fires it deletes the file first, and only the one whose unlink
// succeeds fires, so an armed fault kills exactly one process once.
void armed_fault_point(std::string_view point, int rank) {
  static const char* path = std::getenv("STRATA_CHECKPOINT_FAULT_FILE");
  if (!path || !*path) return;
  std::ifstream in(path);
  if (!in) return;  // not armed
  std::string spec;
  std::getline(in, spec);
  while (!spec.empty() && (spec.back() == ' ' || spec.back() == '\r')) spec.pop_back();
  const auto at = spec.find('@');
  const std::string_view want = std::string_view(spec).substr(0, at);
  int want_rank = -1;
  if (at != std::string::npos && !parse_number(std::string_view(spec).substr(at + 1), want_rank))
    user_fail("checkpoint",
              "STRATA_CHECKPOINT_FAULT_FILE {} holds '{}': expected POINT or POINT@RANK", path,
              spec);
  bool known = false;
  for (auto p : kPoints) known = known || p == want;
  if (!known)
    user_fail("checkpoint",
              "STRATA_CHECKPOINT_FAULT_FILE {} holds '{}': POINT must be one of before_rank_file, "
              "rank_file_tmp, after_rank_file, before_manifest, manifest_tmp, after_manifest, "
              "after_latest",
              path, spec);
  if (want != point || (want_rank >= 0 && want_rank != rank)) return;
  if (::unlink(path) == 0) ::raise(SIGKILL);  // another process fired it first otherwise
}

}  // namespace

void fault_point(std::string_view point, std::int64_t step, int rank) {
  armed_fault_point(point, rank);
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
