#include "framework/checkpoint/save.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>

#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/fault_point.hpp"
#include "framework/checkpoint/latest.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/shard_file.hpp"
#include "framework/checkpoint/shard_writer.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {

namespace {

// Runs one phase: f() on this rank, then the collective verdict. Rethrows this rank's error, or
// reports that another rank failed.
template <typename F>
void phase(const char* what, std::int64_t step, const AllRanksOk& all_ok, F&& f) {
  std::exception_ptr mine;
  try {
    f();
  } catch (...) {
    mine = std::current_exception();
  }
  const bool all = all_ok(mine == nullptr);
  if (mine) std::rethrow_exception(mine);
  if (!all)
    fail("checkpoint", "checkpoint of step {} not committed: another rank failed to {}", step,
         what);
}

}  // namespace

std::vector<ShardRecord> parse_records(const std::vector<std::string>& texts) {
  std::vector<ShardRecord> out;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    try {
      out.push_back(record_from_json(json::parse(texts[i])));
    } catch (const json::exception& e) {
      fail("checkpoint", "the record sent by rank {} is not JSON: {}", i, e.what());
    }
  }
  return out;
}

Manifest commit_checkpoint(const std::string& root, const ManifestHeader& header,
                           std::vector<ShardRecord> records) {
  const std::string name = step_dir_name(header.step);
  const std::string step_dir = join_path(root, name);
  fault_point("before_manifest", header.step, 0);
  if (records.empty()) {
    for (int r = 0; r < header.layout.world; ++r)
      records.push_back(scan_shard(step_dir, rank_file_name(r)));
  } else {
    for (const ShardRecord& r : records) {
      STRATA_CHECK(r.file == rank_file_name(r.rank), "checkpoint", "rank {} reports writing '{}'",
                   r.rank, r.file);
      const std::string path = join_path(step_dir, r.file);
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0)
        fail("checkpoint", "rank {} reports '{}' written, but: {}", r.rank, path,
             std::strerror(errno));
      if (static_cast<std::uint64_t>(st.st_size) != r.bytes)
        fail("checkpoint", "'{}' is {} bytes, rank {} reports {}", path, st.st_size, r.rank,
             r.bytes);
    }
  }
  Manifest m = build_manifest(header, records);
  write_manifest_atomic(step_dir, m);
  fault_point("after_manifest", header.step, 0);
  update_latest_atomic(root, name);
  fault_point("after_latest", header.step, 0);
  return m;
}

namespace {
// A temporary of a write that never finished: "NAME.tmp" (a rank file) or "NAME.tmp.<pid>"
// (write_file_atomic's).
bool is_stale_temporary(const std::string& name) {
  const std::size_t at = name.rfind(kTmpSuffix);
  if (at == std::string::npos || at == 0) return false;
  const std::string rest = name.substr(at + kTmpSuffix.size());
  if (rest.empty()) return true;
  return rest.size() > 1 && rest[0] == '.' &&
         std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; });
}
}  // namespace

void prepare_step_dir(const std::string& root, const std::string& step_dir) {
  make_dirs(root);
  make_dirs(step_dir);
  const std::string manifest = join_path(step_dir, kManifestName);
  bool changed = false;
  if (::unlink(manifest.c_str()) == 0)
    changed = true;
  else if (errno != ENOENT)
    fail("checkpoint", "cannot remove the old '{}': {}", manifest, std::strerror(errno));
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(step_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!is_stale_temporary(name)) continue;
    if (::unlink(e.path().c_str()) != 0 && errno != ENOENT)
      fail("checkpoint", "cannot remove '{}', left by an earlier save of this step: {}",
           e.path().string(), std::strerror(errno));
    changed = true;
  }
  if (ec) fail("checkpoint", "cannot list '{}': {}", step_dir, ec.message());
  if (changed) fsync_dir(step_dir);
}

SaveResult save_checkpoint(const SaveSpec& spec, const std::vector<SliceRef>& slices,
                           const RankState& rank_state, const AllRanksOk& all_ok,
                           const GatherToRoot& gather) {
  STRATA_CHECK(static_cast<bool>(all_ok), "checkpoint",
               "save_checkpoint needs an AllRanksOk callback");
  const ManifestHeader& h = spec.header;
  SaveResult result;
  result.step_dir = join_path(spec.root, step_dir_name(h.step));
  phase("prepare the step directory", h.step, all_ok, [&] {
    STRATA_CHECK(spec.rank >= 0 && spec.rank < h.layout.world, "checkpoint",
                 "rank {} outside the world of {}", spec.rank, h.layout.world);
    if (spec.rank != 0) return;
    prepare_step_dir(spec.root, result.step_dir);
  });
  ShardRecord mine;
  phase("write its file", h.step, all_ok, [&] {
    ShardWriter w(result.step_dir, spec.rank, h.layout.world, h.step);
    std::uint64_t bytes = 0;
    for (const SliceRef& s : slices)
      bytes += static_cast<std::uint64_t>(std::max<std::int64_t>(s.end - s.begin, 0)) *
               dtype_size(s.dtype);
    w.expect(bytes, slices.size());
    for (const SliceRef& s : slices) w.add(s);
    w.set_rank_state(rank_state);
    mine = w.commit();
  });
  std::vector<ShardRecord> records;
  if (gather) records = parse_records(gather(record_to_json(mine).dump()));
  if (spec.rank == 0) {
    commit_checkpoint(spec.root, h, std::move(records));
    result.committed = true;
    result.removed = apply_retention(spec.root, spec.retention);
  }
  return result;
}

}  // namespace strata::checkpoint
