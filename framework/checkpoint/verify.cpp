#include "framework/checkpoint/verify.hpp"

#include <filesystem>
#include <map>
#include <set>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/hdf5_bytes.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/shard_file.hpp"

namespace strata::checkpoint {

namespace {

std::string without_tag(const std::exception& e) {
  std::string s = e.what();
  if (s.rfind("[checkpoint] ", 0) == 0) s.erase(0, 13);
  return s;
}

// Compares what a dataset says about itself with the manifest's slice entry.
void compare(const std::string& file, const ParamEntry& p, const SliceEntry& s,
             const DatasetRecord& d, std::vector<std::string>& faults) {
  auto fault = [&](const std::string& what) {
    faults.push_back(fmt::format("{}: dataset {}: {}", file, s.dataset, what));
  };
  if (d.name != p.name)
    fault(fmt::format("global_name is '{}', manifest says '{}'", d.name, p.name));
  if (d.kind != s.kind) fault(fmt::format("kind is '{}', manifest says '{}'", d.kind, s.kind));
  if (d.global_shape != p.shape)
    fault(fmt::format("global_shape is {}, manifest says {}", d.global_shape.str(), p.shape.str()));
  if (d.begin != s.begin || d.end != s.end || d.run != s.run || d.stride != s.stride)
    fault(fmt::format("slice is {}, manifest says {}", d.layout().str(), s.layout().str()));
  if (d.dtype != s.dtype)
    fault(fmt::format("dtype is {}, manifest says {}", dtype_name(d.dtype), dtype_name(s.dtype)));
  if (d.checksum != s.checksum)
    fault(fmt::format("checksum attribute is {}, manifest says {}", format_checksum(d.checksum),
                      format_checksum(s.checksum)));
}

}  // namespace

VerifyReport verify_checkpoint(const std::string& step_dir, VerifyLevel level) {
  VerifyReport rep;
  rep.step_dir = step_dir;
  try {
    rep.manifest = read_manifest(step_dir);
  } catch (const Error& e) {
    rep.faults.push_back(without_tag(e));
    return rep;
  }
  const Manifest& m = *rep.manifest;
  // Slices by file.
  std::map<std::string, std::vector<std::pair<const ParamEntry*, const SliceEntry*>>> by_file;
  for (const ParamEntry& p : m.params)
    for (const SliceEntry& s : p.slices) by_file[s.file].push_back({&p, &s});

  for (const FileEntry& fe : m.files) {
    const std::string path = join_path(step_dir, fe.name);
    ++rep.files_checked;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      rep.faults.push_back(fmt::format("{}: rank file is missing", path));
      continue;
    }
    const auto size = std::filesystem::file_size(path, ec);
    if (ec || size != fe.bytes) {
      rep.faults.push_back(
          fmt::format("{}: file is {} bytes, manifest says {} (truncated or replaced)", path,
                      ec ? 0 : size, fe.bytes));
      continue;
    }
    try {
      verify_hdf5_bytes(path, fe.hdf5_extents, fe.hdf5_checksum);  // before HDF5 parses it
      ShardFile f(path);
      if (f.header().rank != fe.rank || f.header().world != m.layout.world ||
          f.header().step != m.step)
        rep.faults.push_back(
            fmt::format("{}: file is rank {} of {} at step {}, manifest expects rank {} of {} at "
                        "step {}",
                        path, f.header().rank, f.header().world, f.header().step, fe.rank,
                        m.layout.world, m.step));
      try {
        f.rank_state(&fe.state_checksum);
      } catch (const Error& e) {
        rep.faults.push_back(without_tag(e));
      }
      std::set<std::string> listed;
      for (const auto& [p, s] : by_file[fe.name]) {
        listed.insert(s->dataset);
        ++rep.datasets_checked;
        try {
          const DatasetRecord d = f.describe(s->dataset);
          const std::size_t before = rep.faults.size();
          compare(path, *p, *s, d, rep.faults);
          if (rep.faults.size() != before || level != VerifyLevel::full) continue;
          const std::uint32_t crc = f.checksum(d);
          rep.bytes_checksummed += static_cast<std::uint64_t>(d.numel()) * dtype_size(d.dtype);
          if (crc != s->checksum)
            rep.faults.push_back(
                fmt::format("{}: dataset {}: checksum mismatch: manifest says {}, data gives {}",
                            path, s->dataset, format_checksum(s->checksum), format_checksum(crc)));
        } catch (const Error& e) {
          rep.faults.push_back(without_tag(e));
        }
      }
      for (const DatasetRecord& d : f.scan())
        if (!listed.count(d.path))
          rep.faults.push_back(
              fmt::format("{}: dataset {}: not listed in the manifest (file from another "
                          "checkpoint?)",
                          path, d.path));
    } catch (const Error& e) {
      rep.faults.push_back(without_tag(e));
    }
  }
  return rep;
}

}  // namespace strata::checkpoint
