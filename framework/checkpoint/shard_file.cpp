#include "framework/checkpoint/shard_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/h5_io.hpp"
#include "framework/checkpoint/hdf5_bytes.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/raw_io.hpp"
#include "framework/checkpoint/slice.hpp"
#include "framework/core/json_limits.hpp"

namespace strata::checkpoint {

namespace {

// Whole-dataset passes go in pieces of this many bytes (a multiple of every element size).
constexpr std::size_t kReadPiece = 8u << 20;

// Error text without its "[checkpoint] " tag, to nest inside a CheckpointError.
std::string untagged(const std::exception& e) {
  std::string s = e.what();
  const std::string tag = "[checkpoint] ";
  if (s.rfind(tag, 0) == 0) s.erase(0, tag.size());
  return s;
}

// Runs f, turning any strata::Error into a CheckpointError naming file and dataset.
template <typename F>
auto in_context(const std::string& file, const std::string& dataset, F&& f) {
  try {
    return f();
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& e) {
    throw CheckpointError(file, dataset, untagged(e));
  }
}

herr_t collect_links(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

// Link names of a group, in creation order when the file tracks it (Strata's do), else by name.
std::vector<std::string> children(hid_t group) {
  std::vector<std::string> out;
  hsize_t idx = 0;
  if (H5Literate(group, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, collect_links, &out) >= 0)
    return out;
  h5::last_error();  // not tracked: clear the error stack and fall back to name order
  out.clear();
  idx = 0;
  STRATA_CHECK_H5(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_links, &out));
  return out;
}

DType parse_stored_dtype(const std::string& s) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8, DType::u8, DType::i16,
                  DType::u16, DType::i32, DType::u32, DType::i64})
    if (dtype_name(t) == s) return t;
  fail("checkpoint", "attribute 'dtype' is '{}', not a Strata dtype name", s);
}

}  // namespace

ShardFile::ShardFile(std::string path) : path_(std::move(path)) {
  in_context(path_, "", [&] {
    file_ = h5::open_file(path_);
    const hid_t f = file_.get();
    const std::string format = h5::read_attr_string(f, "format");
    if (format != kShardFormat)
      fail("checkpoint", "format is '{}', expected '{}'", format, kShardFormat);
    header_.format_version = h5::read_attr_i64(f, "format_version");
    if (header_.format_version != kShardFormatVersion)
      fail("checkpoint", "format_version {} is not supported (this build reads {})",
           header_.format_version, kShardFormatVersion);
    const std::int64_t rank = h5::read_attr_i64(f, "rank");
    const std::int64_t world = h5::read_attr_i64(f, "world");
    if (!(world >= 1 && world <= (1 << 24) && rank >= 0 && rank < world))
      fail("checkpoint", "rank {} / world {} is impossible", rank, world);
    header_.rank = static_cast<int>(rank);
    header_.world = static_cast<int>(world);
    header_.step = h5::read_attr_i64(f, "step");
    return 0;
  });
  // Raw reads need a little-endian host (the stored types are little-endian) and the file's size.
  if constexpr (std::endian::native == std::endian::little) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0) {
      size_ = static_cast<std::uint64_t>(st.st_size);
      raw_ = std::make_unique<RawReader>(path_, fd_);
    } else if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
}

ShardFile::~ShardFile() {
  raw_.reset();
  if (fd_ >= 0) ::close(fd_);
}

void ShardFile::idle() const {
  if (raw_) raw_->idle();
}

h5::Id ShardFile::open_dataset(const std::string& dataset_path) const {
  return in_context(path_, dataset_path,
                    [&] { return h5::open_dataset(file_.get(), dataset_path); });
}

DatasetRecord ShardFile::describe(const std::string& dataset_path) const {
  return in_context(path_, dataset_path, [&] {
    h5::Id ds = h5::open_dataset(file_.get(), dataset_path);
    const hid_t d = ds.get();
    DatasetRecord r;
    r.path = dataset_path;
    r.name = h5::read_attr_string(d, "global_name");
    r.kind = h5::read_attr_string(d, "kind");
    r.global_shape = Shape(h5::read_attr_i64s(d, "global_shape"));
    r.begin = h5::read_attr_i64(d, "slice_begin");
    r.end = h5::read_attr_i64(d, "slice_end");
    if (h5::has_attr(d, "slice_run")) {
      r.run = h5::read_attr_i64(d, "slice_run");
      r.stride = h5::read_attr_i64(d, "slice_stride");
      if (r.run <= 0) fail("checkpoint", "slice_run is {}; a hyperslab has rows of >= 1", r.run);
    }
    r.dtype = parse_stored_dtype(h5::read_attr_string(d, "dtype"));
    const std::string sum = h5::read_attr_string(d, "checksum");
    const auto crc = parse_checksum(sum);
    if (!crc) fail("checkpoint", "checksum attribute '{}' is not crc32:XXXXXXXX", sum);
    r.checksum = *crc;
    if (!valid_kind(r.kind)) fail("checkpoint", "invalid kind '{}'", r.kind);
    if (!valid_param_name(r.name)) fail("checkpoint", "invalid global_name '{}'", r.name);
    for (auto e : r.global_shape.dims())
      if (e < 0) fail("checkpoint", "negative extent in global_shape {}", r.global_shape.str());
    const std::int64_t numel = r.global_shape.numel();
    if (const std::string e = r.layout().error(numel); !e.empty())
      fail("checkpoint", "{} (global_shape {})", e, r.global_shape.str());
    const auto dims = h5::dataset_dims(d);
    if (dims.size() != 1 || dims[0] != r.end - r.begin)
      fail("checkpoint", "extent is {} but the slice [{}, {}) has {} elements", Shape(dims).str(),
           r.begin, r.end, r.end - r.begin);
    h5::Id type(STRATA_CHECK_H5(H5Dget_type(d)), H5Tclose);
    if (!h5::type_matches(type.get(), r.dtype))
      fail("checkpoint", "stored as {}, but its dtype attribute says {}",
           h5::describe_type(type.get()), dtype_name(r.dtype));
    if (fd_ >= 0) {
      r.data_offset = h5::raw_data_offset(d);
      const std::uint64_t bytes = static_cast<std::uint64_t>(r.numel()) * dtype_size(r.dtype);
      if (r.data_offset && (*r.data_offset > size_ || size_ - *r.data_offset < bytes))
        fail("checkpoint", "its {} bytes at offset {} extend past the end of the {}-byte file",
             bytes, *r.data_offset, size_);
    }
    return r;
  });
}

std::uint32_t ShardFile::read_bytes(const DatasetRecord& d, std::uint64_t from, std::size_t n,
                                    void* out, std::uint32_t seed) const {
  if (n == 0) return seed;
  if (d.data_offset && raw_) return raw_->read(*d.data_offset + from, out, n, seed);
  const std::size_t esize = dtype_size(d.dtype);
  h5::Id ds = h5::open_dataset(file_.get(), d.path);
  h5::read_dataset_range(ds.get(), d.dtype, static_cast<std::int64_t>(from / esize),
                         static_cast<std::int64_t>(n / esize), out);
  return crc32(out, n, seed);
}

std::uint32_t ShardFile::checksum(const DatasetRecord& d) const {
  return in_context(path_, d.path, [&] {
    const std::uint64_t total = static_cast<std::uint64_t>(d.numel()) * dtype_size(d.dtype);
    std::vector<unsigned char> buf(
        static_cast<std::size_t>(std::min<std::uint64_t>(total, kReadPiece)));
    std::uint32_t crc = 0;
    for (std::uint64_t at = 0; at < total; at += kReadPiece) {
      const std::size_t c =
          static_cast<std::size_t>(std::min<std::uint64_t>(kReadPiece, total - at));
      crc = read_bytes(d, at, c, buf.data(), crc);
    }
    return crc;
  });
}

void ShardFile::read(const DatasetRecord& d, std::int64_t offset, std::int64_t count,
                     void* out) const {
  in_context(path_, d.path, [&] {
    if (offset < 0 || count < 0 || offset + count > d.numel())
      fail("checkpoint", "read of [{}, {}) outside its {} elements", offset, offset + count,
           d.numel());
    const std::size_t esize = dtype_size(d.dtype);
    read_bytes(d, static_cast<std::uint64_t>(offset) * esize,
               static_cast<std::size_t>(count) * esize, out, 0);
    return 0;
  });
}

std::uint32_t ShardFile::read_checksummed(const DatasetRecord& d, std::int64_t offset,
                                          std::int64_t count, void* out) const {
  return in_context(path_, d.path, [&] {
    if (offset < 0 || count < 0 || offset + count > d.numel())
      fail("checkpoint", "read of [{}, {}) outside its {} elements", offset, offset + count,
           d.numel());
    const std::size_t esize = dtype_size(d.dtype);
    const std::uint64_t total = static_cast<std::uint64_t>(d.numel()) * esize;
    const std::uint64_t lo = static_cast<std::uint64_t>(offset) * esize;
    const std::uint64_t hi = lo + static_cast<std::uint64_t>(count) * esize;
    auto* dst = static_cast<unsigned char*>(out);
    std::vector<unsigned char> buf;
    std::uint32_t crc = 0;
    // In pieces: the wanted range into out, the rest through buf; checksummed while copied.
    for (std::uint64_t at = 0; at < total;) {
      std::uint64_t stop = std::min<std::uint64_t>(total, at + kReadPiece);
      if (at < lo) stop = std::min(stop, lo);
      if (at >= lo && at < hi) stop = std::min(stop, hi);
      const std::size_t c = static_cast<std::size_t>(stop - at);
      unsigned char* p = nullptr;
      if (at >= lo && at < hi) {
        p = dst + (at - lo);
      } else {
        if (buf.empty())
          buf.resize(static_cast<std::size_t>(std::min<std::uint64_t>(total, kReadPiece)));
        p = buf.data();
      }
      crc = read_bytes(d, at, c, p, crc);
      at = stop;
    }
    return crc;
  });
}

std::vector<DatasetRecord> ShardFile::scan() const {
  const std::vector<std::string> groups =
      in_context(path_, "", [&] { return children(file_.get()); });
  std::vector<DatasetRecord> out;
  for (const auto& g : groups) {
    if (g == "state") continue;
    const std::string gpath = "/" + g;
    const auto names = in_context(path_, gpath, [&] {
      H5O_info_t info;
      STRATA_CHECK_H5(
          H5Oget_info_by_name2(file_.get(), gpath.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT));
      if (info.type != H5O_TYPE_GROUP) fail("checkpoint", "expected a group of slices");
      h5::Id grp = h5::open_group(file_.get(), gpath);
      return children(grp.get());
    });
    for (const auto& n : names) {
      DatasetRecord r = describe(gpath + "/" + n);
      if (r.kind != g)
        corrupt(path_, r.path, "kind attribute '{}' does not match its group '{}'", r.kind, g);
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string ShardFile::rank_state_text(std::uint32_t* stored_checksum) const {
  return in_context(path_, kRankStateDataset, [&] {
    h5::Id ds = h5::open_dataset(file_.get(), kRankStateDataset);
    const std::string sum = h5::read_attr_string(ds.get(), "checksum");
    const auto crc = parse_checksum(sum);
    if (!crc) fail("checkpoint", "checksum attribute '{}' is not crc32:XXXXXXXX", sum);
    if (stored_checksum) *stored_checksum = *crc;
    return h5::read_string_dataset(ds.get());
  });
}

RankState ShardFile::rank_state(const std::uint32_t* expected_checksum) const {
  std::uint32_t stored = 0;
  const std::string text = rank_state_text(&stored);
  const std::uint32_t actual = crc32(text.data(), text.size());
  const std::uint32_t want = expected_checksum ? *expected_checksum : stored;
  if (actual != want)
    corrupt(path_, kRankStateDataset, "checksum mismatch: expected {}, contents give {}",
            format_checksum(want), format_checksum(actual));
  return in_context(path_, kRankStateDataset, [&] {
    json j;
    check_json_limits(text, "/state/rank", "checkpoint");
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      fail("checkpoint", "not valid JSON: {}", e.what());
    }
    return rank_state_from_json(j);
  });
}

ShardRecord scan_shard(const std::string& step_dir, const std::string& file_name) {
  const std::string path = join_path(step_dir, file_name);
  ShardFile f(path);
  ShardRecord r;
  r.file = file_name;
  r.rank = f.header().rank;
  r.datasets = f.scan();
  std::uint32_t stored = 0;
  const std::string text = f.rank_state_text(&stored);
  if (crc32(text.data(), text.size()) != stored)
    corrupt(path, kRankStateDataset, "checksum mismatch: stored {}, contents give {}",
            format_checksum(stored), format_checksum(crc32(text.data(), text.size())));
  r.state_checksum = stored;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) corrupt(path, "", "cannot stat: {}", std::strerror(errno));
  r.bytes = static_cast<std::uint64_t>(st.st_size);
  // HDF5's bytes: everything but the datasets' raw data (known only when every dataset is
  // contiguous, as Strata writes them).
  Extents data;
  for (const DatasetRecord& d : r.datasets) {
    if (!d.data_offset) return r;
    data.push_back({*d.data_offset, static_cast<std::uint64_t>(d.numel()) * dtype_size(d.dtype)});
  }
  r.hdf5_extents = complement(data, r.bytes);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) corrupt(path, "", "cannot open: {}", std::strerror(errno));
  r.hdf5_checksum = checksum_extents(fd.get(), path, r.hdf5_extents, r.bytes);
  return r;
}

}  // namespace strata::checkpoint
