#include "framework/checkpoint/reader.hpp"

#include <filesystem>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/hdf5_bytes.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/core/convert.hpp"

namespace strata::checkpoint {

CheckpointReader::CheckpointReader(std::string step_dir, ReaderOptions options)
    : dir_(std::move(step_dir)), options_(options), manifest_(read_manifest(dir_)) {}

CheckpointReader::~CheckpointReader() = default;

bool CheckpointReader::has(std::string_view kind, const std::string& name) const {
  const ParamEntry* p = manifest_.find(name);
  if (!p) return false;
  for (const auto& s : p->slices)
    if (s.kind == kind) return true;
  return false;
}

const ShardFile& CheckpointReader::file(const std::string& name) {
  const ShardFile& f = open_file(name);
  // Read-ahead memory for one file at a time, however many a resharding load touches.
  if (reading_ && reading_ != &f) reading_->idle();
  reading_ = &f;
  return f;
}

const ShardFile& CheckpointReader::open_file(const std::string& name) {
  auto it = files_.find(name);
  if (it != files_.end()) return *it->second;
  const FileEntry* fe = nullptr;
  for (const auto& f : manifest_.files)
    if (f.name == name) fe = &f;
  const std::string path = join_path(dir_, name);
  if (!fe) corrupt(path, "", "not a rank file of this checkpoint");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) corrupt(path, "", "rank file is missing");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size != fe->bytes)
    corrupt(path, "", "file is {} bytes, manifest says {} (truncated or replaced)", ec ? 0 : size,
            fe->bytes);
  verify_hdf5_bytes(path, fe->hdf5_extents, fe->hdf5_checksum);  // before HDF5 parses it
  auto f = std::make_unique<ShardFile>(path);
  if (f->header().rank != fe->rank || f->header().world != manifest_.layout.world ||
      f->header().step != manifest_.step)
    corrupt(path, "", "file is rank {} of {} at step {}, manifest expects rank {} of {} at step {}",
            f->header().rank, f->header().world, f->header().step, fe->rank, manifest_.layout.world,
            manifest_.step);
  return *files_.emplace(name, std::move(f)).first->second;
}

const DatasetRecord& CheckpointReader::dataset(const ShardFile& f, const ParamEntry& p,
                                               const SliceEntry& s) {
  const auto key = std::make_pair(s.file, s.dataset);
  auto it = described_.find(key);
  if (it != described_.end()) return it->second;
  DatasetRecord d = f.describe(s.dataset);
  if (d.name != p.name || d.kind != s.kind || d.global_shape != p.shape || d.begin != s.begin ||
      d.end != s.end || d.run != s.run || d.stride != s.stride || d.dtype != s.dtype ||
      d.checksum != s.checksum)
    corrupt(f.path(), s.dataset,
            "describes itself as {} {} {} {} {} {}, manifest says {} {} {} {} {} {}", d.kind,
            d.name, d.global_shape.str(), d.layout().str(), dtype_name(d.dtype),
            format_checksum(d.checksum), s.kind, p.name, p.shape.str(), s.layout().str(),
            dtype_name(s.dtype), format_checksum(s.checksum));
  return described_.emplace(key, std::move(d)).first->second;
}

void CheckpointReader::read_range(std::string_view kind, const std::string& name,
                                  std::int64_t begin, std::int64_t end, void* out, DType want) {
  const ParamEntry* p = manifest_.find(name);
  if (!p) user_fail("checkpoint", "{}: no parameter '{}' in the checkpoint", dir_, name);
  if (!(0 <= begin && begin <= end && end <= p->numel()))
    user_fail("checkpoint", "{}: range [{}, {}) is outside the {} elements of {}", dir_, begin, end,
              p->numel(), name);
  std::vector<const SliceEntry*> slices;
  for (const auto& s : p->slices)
    if (s.kind == kind) slices.push_back(&s);
  if (slices.empty())
    user_fail("checkpoint", "{}: the checkpoint has no '{}' for {} (it has: {})", dir_, kind, name,
              fmt::join(p->kinds(), ", "));
  const std::size_t out_size = dtype_size(want);
  std::vector<unsigned char> tmp;
  std::int64_t pos = begin;
  while (pos < end) {
    // The slice holding pos whose run from pos reaches furthest (a hyperslab's run ends with
    // its row).
    const SliceEntry* best = nullptr;
    std::int64_t at = 0, reach = 0;  // best's offset of pos, and its elements from there
    for (const SliceEntry* s : slices) {
      const auto [offset, count] = s->layout().locate(pos);
      if (offset >= 0 && count > reach) {
        best = s;
        at = offset;
        reach = count;
      }
    }
    if (!best)
      throw CheckpointError(join_path(dir_, kManifestName), "",
                            fmt::format("no slice of {} {} holds element {}", kind, name, pos));
    const ShardFile& f = file(best->file);
    const DatasetRecord& d = dataset(f, *p, *best);
    const auto key = std::make_pair(best->file, best->dataset);
    const std::int64_t stop = std::min(end, pos + reach);
    const std::int64_t n = stop - pos;
    unsigned char* dst =
        static_cast<unsigned char*>(out) + static_cast<std::size_t>(pos - begin) * out_size;
    const bool verify = options_.verify_checksums && !verified_.count(key);
    void* into = dst;
    if (d.dtype != want) {
      tmp.resize(static_cast<std::size_t>(n) * dtype_size(d.dtype));
      into = tmp.data();
    }
    if (verify) {
      // One pass: the whole dataset is read once, checksummed, and the range kept.
      const std::uint32_t crc = f.read_checksummed(d, at, n, into);
      if (crc != best->checksum)
        corrupt(f.path(), best->dataset, "checksum mismatch: manifest says {}, data gives {}",
                format_checksum(best->checksum), format_checksum(crc));
      verified_.insert(key);
    } else {
      f.read(d, at, n, into);
    }
    if (d.dtype != want) convert(tmp.data(), d.dtype, dst, want, static_cast<std::size_t>(n));
    pos = stop;
  }
}

std::vector<float> CheckpointReader::read_f32(std::string_view kind, const std::string& name) {
  const ParamEntry* p = manifest_.find(name);
  if (!p) user_fail("checkpoint", "{}: no parameter '{}' in the checkpoint", dir_, name);
  std::vector<float> out(static_cast<std::size_t>(p->numel()));
  read_range(kind, name, 0, p->numel(), out.data(), DType::f32);
  return out;
}

RankState CheckpointReader::rank_state(int rank) {
  if (rank < 0 || rank >= manifest_.layout.world)
    user_fail("checkpoint", "{}: rank {} is outside the saved world of {}", dir_, rank,
              manifest_.layout.world);
  const FileEntry& fe = manifest_.files[static_cast<std::size_t>(rank)];
  return open_file(fe.name).rank_state(&fe.state_checksum);
}

}  // namespace strata::checkpoint
