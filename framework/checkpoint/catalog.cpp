#include "framework/checkpoint/catalog.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/latest.hpp"
#include "framework/checkpoint/naming.hpp"

namespace strata::checkpoint {

namespace fs = std::filesystem;

void warn_to_stderr(const std::string& message) {
  std::fprintf(stderr, "strata: warning: %s\n", message.c_str());
  std::fflush(stderr);
}

std::vector<CheckpointInfo> list_step_dirs(const std::string& root) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto step = parse_step_dir_name(name);
    std::error_code ec2;
    if (step && it->is_directory(ec2)) out.push_back({join_path(root, name), *step});
  }
  if (ec) fail("checkpoint", "cannot list '{}': {}", root, ec.message());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

std::vector<CheckpointInfo> list_complete_checkpoints(const std::string& root) {
  std::vector<CheckpointInfo> out;
  for (auto& c : list_step_dirs(root)) {
    try {
      const Manifest m = read_manifest(c.dir);
      if (m.step == c.step) out.push_back(c);
    } catch (const Error&) {
      // not complete: not a checkpoint
    }
  }
  return out;
}

std::optional<CheckpointInfo> find_latest(const std::string& root, const FindOptions& opt) {
  auto warn = [&](const std::string& msg) {
    if (opt.warn) opt.warn(msg);
  };
  std::vector<CheckpointInfo> candidates = list_step_dirs(root);
  std::optional<std::string> latest;
  try {
    latest = read_latest(root);
  } catch (const CheckpointError& e) {
    warn(fmt::format("{}; looking for the newest complete checkpoint instead", e.what()));
  }
  if (latest) {
    const std::int64_t step = *parse_step_dir_name(*latest);
    const bool listed = std::any_of(candidates.begin(), candidates.end(),
                                    [&](const CheckpointInfo& c) { return c.step == step; });
    if (!listed)
      candidates.push_back({join_path(root, *latest), step});  // fails verification below
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const auto& a, const auto& b) { return a.step > b.step; });
  // A step directory without a manifest that `latest` does not name is a save that never
  // committed (the job stopped while writing it): not a checkpoint, broken or otherwise.
  std::vector<CheckpointInfo> uncommitted;
  std::erase_if(candidates, [&](const CheckpointInfo& c) {
    const std::string name = fs::path(c.dir).filename().string();
    std::error_code ec;
    if ((latest && *latest == name) || fs::exists(join_path(c.dir, kManifestName), ec))
      return false;
    uncommitted.push_back(c);
    return true;
  });
  // Warns about the uncommitted directories newer than the checkpoint chosen.
  auto note_uncommitted = [&](std::int64_t chosen) {
    std::string dirs;
    for (const auto& u : uncommitted)
      if (u.step > chosen) dirs += (dirs.empty() ? "" : ", ") + u.dir;
    if (!dirs.empty())
      warn(fmt::format("[checkpoint] ignoring {} (no {}: a save that did not finish)", dirs,
                       kManifestName));
  };
  if (candidates.empty()) {
    note_uncommitted(-1);
    return std::nullopt;
  }

  std::vector<std::string> problems;
  for (const CheckpointInfo& c : candidates) {
    std::string problem;
    std::error_code ec;
    if (!fs::is_directory(c.dir, ec)) {
      problem =
          fmt::format("{}: named by '{}' but does not exist", c.dir, join_path(root, kLatestName));
    } else {
      const VerifyReport rep = verify_checkpoint(c.dir, opt.level);
      if (rep.ok() && rep.manifest->step != c.step)
        problem = fmt::format("{}: manifest is for step {}", c.dir, rep.manifest->step);
      else if (!rep.ok())
        problem = rep.faults.size() == 1 ? rep.faults[0]
                                         : fmt::format("{} (and {} more faults)", rep.faults[0],
                                                       rep.faults.size() - 1);
    }
    if (problem.empty()) {
      note_uncommitted(c.step);
      const std::string name = fs::path(c.dir).filename().string();
      if (!problems.empty())
        warn(fmt::format("[checkpoint] skipped {} newer checkpoint(s); resuming from {}",
                         problems.size(), c.dir));
      else if (latest && *latest != name)
        warn(fmt::format("[checkpoint] '{}' names {}, but {} is newer and complete; using it",
                         join_path(root, kLatestName), *latest, name));
      return c;
    }
    problems.push_back(problem);
    if (!opt.fallback)
      throw CheckpointError("", "", fmt::format("newest checkpoint is not usable: {}", problem));
    warn(fmt::format("[checkpoint] not usable, falling back to an older checkpoint: {}", problem));
  }
  std::string all;
  for (const auto& p : problems) all += "\n  " + p;
  throw CheckpointError("", "", fmt::format("no usable checkpoint in '{}':{}", root, all));
}

std::string resolve_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) user_fail("checkpoint", "'{}' is not a directory", dir);
  if (fs::exists(join_path(dir, kManifestName), ec)) return dir;
  std::optional<std::string> latest;
  try {
    latest = read_latest(dir);
  } catch (const CheckpointError& e) {
    throw UserError("checkpoint", std::string(e.what()).substr(13));
  }
  if (latest) return join_path(dir, *latest);
  if (parse_step_dir_name(fs::path(dir).lexically_normal().filename().string()) ||
      parse_step_dir_name(fs::path(dir).lexically_normal().parent_path().filename().string()))
    user_fail("checkpoint", "'{}' has no {}: it is not a complete checkpoint", dir, kManifestName);
  const auto steps = list_step_dirs(dir);
  if (!steps.empty())
    user_fail("checkpoint", "'{}' has no '{}' file; pass a step directory such as '{}'", dir,
              kLatestName, steps.back().dir);
  user_fail("checkpoint",
            "'{}' is neither a checkpoint root (no '{}') nor a step directory (no {})", dir,
            kLatestName, kManifestName);
}

}  // namespace strata::checkpoint
