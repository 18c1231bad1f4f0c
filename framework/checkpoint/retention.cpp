#include "framework/checkpoint/retention.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/latest.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/reclaim.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {

namespace fs = std::filesystem;

void remove_checkpoint(const std::string& step_dir) {
  const std::string manifest = join_path(step_dir, kManifestName);
  if (::unlink(manifest.c_str()) == 0)
    fsync_dir(step_dir);
  else if (errno != ENOENT)
    fail("checkpoint", "cannot remove '{}': {}", manifest, std::strerror(errno));
  reclaim(step_dir);  // out of sight now; its files are deleted in the background
}

std::vector<std::string> apply_retention(const std::string& root, const RetentionPolicy& p) {
  STRATA_CHECK(p.save_total_limit >= 0 && p.keep_every >= 0, "checkpoint",
               "retention: save_total_limit {} and keep_every {} must be >= 0", p.save_total_limit,
               p.keep_every);
  std::optional<std::string> latest;
  try {
    latest = read_latest(root);
  } catch (const Error&) {
    // an unreadable pointer protects nothing; the newest checkpoints are kept by the limit anyway
  }
  const auto complete = list_complete_checkpoints(root);
  std::set<std::string> keep;
  const std::int64_t n = static_cast<std::int64_t>(complete.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& c = complete[static_cast<std::size_t>(i)];
    const bool newest = p.save_total_limit == 0 || i >= n - p.save_total_limit;
    const bool every = p.keep_every > 0 && c.step % p.keep_every == 0;
    const bool pointed = latest && fs::path(c.dir).filename().string() == *latest;
    if (newest || every || pointed) keep.insert(c.dir);
  }
  std::vector<std::string> removed;
  const std::int64_t newest_step = complete.empty() ? -1 : complete.back().step;
  std::set<std::string> complete_dirs;
  for (const auto& c : complete) complete_dirs.insert(c.dir);
  for (const auto& d : list_step_dirs(root)) {
    const std::string name = fs::path(d.dir).filename().string();
    if (latest && name == *latest) continue;
    const bool is_complete = complete_dirs.count(d.dir) > 0;
    const bool drop = is_complete ? !keep.count(d.dir) : d.step < newest_step;
    if (!drop) continue;
    remove_checkpoint(d.dir);
    removed.push_back(d.dir);
  }
  reclaim_leftovers(root);
  return removed;
}

}  // namespace strata::checkpoint
