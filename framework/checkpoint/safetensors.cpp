#include "framework/checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "framework/core/json_limits.hpp"

namespace strata::checkpoint {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

struct DTypeInfo {
  const char* name;
  std::uint64_t size;
  std::optional<DType> strata;
};

// safetensors' dtypes with a whole number of bytes per element.
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 1, std::nullopt},    {"U8", 1, std::nullopt},      {"I8", 1, std::nullopt},
    {"F8_E5M2", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"I16", 2, std::nullopt},
    {"U16", 2, std::nullopt},     {"F16", 2, DType::f16},       {"BF16", 2, DType::bf16},
    {"I32", 4, std::nullopt},     {"U32", 4, std::nullopt},     {"F32", 4, DType::f32},
    {"F64", 8, std::nullopt},     {"I64", 8, std::nullopt},     {"U64", 8, std::nullopt},
};

const DTypeInfo* dtype_info(std::string_view name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw UserError("checkpoint", fmt::format("{}: {}", path, what));
}

// A non-negative JSON integer that fits u64, or nullopt.
std::optional<std::uint64_t> as_u64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

void read_exact(int fd, void* dst, std::uint64_t n, std::uint64_t offset, const std::string& path) {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) bad(path, fmt::format("read failed: {}", std::strerror(errno)));
    if (r == 0) bad(path, "file ended early (changed while reading?)");
    p += r;
    n -= static_cast<std::uint64_t>(r);
    offset += static_cast<std::uint64_t>(r);
  }
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name,
                             const nlohmann::json& v) {
  const std::string where = fmt::format("tensor '{}'", name);
  if (!v.is_object()) bad(path, where + " is not a JSON object");
  for (const auto& [k, _] : v.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      bad(path, fmt::format("{} has an unknown field '{}'", where, k));
  SafetensorsEntry e;
  e.name = name;
  const auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) bad(path, where + " lacks a string 'dtype'");
  e.dtype = dt->get<std::string>();
  const DTypeInfo* info = dtype_info(e.dtype);
  if (!info) bad(path, fmt::format("{} has unknown dtype '{}'", where, e.dtype));
  e.strata = info->strata;
  const auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) bad(path, where + " lacks an array 'shape'");
  std::uint64_t numel = 1;
  bool overflow = false;
  for (const auto& d : *sh) {
    const auto n = as_u64(d);
    if (!n || *n > static_cast<std::uint64_t>(INT64_MAX))
      bad(path, fmt::format("{} has shape {}: dimensions must be non-negative integers", where,
                            sh->dump()));
    e.shape.push_back(static_cast<std::int64_t>(*n));
    if (*n != 0 && numel > UINT64_MAX / info->size / *n) overflow = true;
    numel *= *n;
  }
  const auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !as_u64((*off)[0]) ||
      !as_u64((*off)[1]))
    bad(path, where + " lacks 'data_offsets' [begin, end] of non-negative integers");
  e.begin = *as_u64((*off)[0]);
  e.end = *as_u64((*off)[1]);
  if (e.end < e.begin)
    bad(path, fmt::format("{} has data_offsets [{}, {}]: end before begin", where, e.begin, e.end));
  if (overflow || (numel != 0 && numel * info->size != e.end - e.begin))
    bad(path,
        fmt::format("{} is {} {} ({} bytes) but data_offsets [{}, {}] hold {} bytes", where,
                    e.dtype, sh->dump(), overflow ? "too many" : std::to_string(numel * info->size),
                    e.begin, e.end, e.end - e.begin));
  if (numel == 0 && e.end != e.begin)
    bad(path, fmt::format("{} is empty but data_offsets [{}, {}] hold {} bytes", where, e.begin,
                          e.end, e.end - e.begin));
  return e;
}

}  // namespace

std::int64_t SafetensorsEntry::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string_view safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    default:
      user_fail("checkpoint", "safetensors export supports f32, bf16 and f16, not {}",
                dtype_name(t));
  }
}

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) bad(path_, fmt::format("cannot open: {}", std::strerror(errno)));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) bad(path_, fmt::format("cannot stat: {}", std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) bad(path_, "not a regular file");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size < 8) bad(path_, fmt::format("{} bytes: too short for a safetensors file", size));
    std::uint64_t n = 0;
    read_exact(fd_, &n, 8, 0, path_);
    if (n > kSafetensorsMaxHeader || n > size - 8)
      bad(path_, fmt::format("header length {} does not fit the file ({} bytes): not a "
                             "safetensors file, or truncated",
                             n, size));
    if (n < 2) bad(path_, fmt::format("header length {} is too short for a JSON object", n));
    std::string text(n, '\0');
    read_exact(fd_, text.data(), n, 8, path_);
    if (text.front() != '{') bad(path_, "header does not start with '{': not a safetensors file");
    data_offset_ = 8 + n;
    const std::uint64_t buffer = size - data_offset_;

    std::set<std::string> seen;
    std::string duplicate;
    nlohmann::json header;
    check_json_limits(text, path_ + ": header", "checkpoint");  // depth, number sizes
    try {
      header = nlohmann::json::parse(
          text, [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& j) {
            if (ev == nlohmann::json::parse_event_t::key && depth == 1 &&
                !seen.insert(j.get<std::string>()).second && duplicate.empty())
              duplicate = j.get<std::string>();
            return true;
          });
    } catch (const nlohmann::json::exception& e) {
      bad(path_, fmt::format("header is not valid JSON: {}", e.what()));
    }
    if (!header.is_object()) bad(path_, "header is not a JSON object");
    if (!duplicate.empty()) bad(path_, fmt::format("header names '{}' twice", duplicate));
    for (const auto& [k, v] : header.items()) {
      if (k == "__metadata__") {
        if (!v.is_object()) bad(path_, "__metadata__ is not an object of strings");
        for (const auto& [mk, mv] : v.items()) {
          if (!mv.is_string()) bad(path_, fmt::format("__metadata__ '{}' is not a string", mk));
          metadata_[mk] = mv.get<std::string>();
        }
        continue;
      }
      if (k.empty()) bad(path_, "a tensor has an empty name");
      entries_.push_back(parse_entry(path_, k, v));
    }
    std::sort(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t at = 0;
    const SafetensorsEntry* prev = nullptr;
    for (const auto& e : entries_) {
      if (e.end > buffer)
        bad(path_, fmt::format("tensor '{}' has data_offsets [{}, {}] past the end of the data "
                               "({} bytes): truncated file?",
                               e.name, e.begin, e.end, buffer));
      if (e.begin < at)
        bad(path_, fmt::format("tensors '{}' and '{}' overlap ([{}, {}) and [{}, {}))", prev->name,
                               e.name, prev->begin, prev->end, e.begin, e.end));
      if (e.begin > at)
        bad(path_, fmt::format("bytes [{}, {}) before tensor '{}' belong to no tensor", at, e.begin,
                               e.name));
      at = e.end;
      prev = &e;
    }
    if (at != buffer)
      bad(path_, fmt::format("{} bytes after the last tensor belong to no tensor", buffer - at));
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsEntry* SafetensorsReader::find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<unsigned char> SafetensorsReader::read_bytes(const SafetensorsEntry& e) const {
  std::vector<unsigned char> out(e.end - e.begin);
  read_exact(fd_, out.data(), out.size(), data_offset_ + e.begin, path_);
  return out;
}

std::vector<float> SafetensorsReader::read_f32(const SafetensorsEntry& e) const {
  if (!e.strata)
    bad(path_, fmt::format("tensor '{}' is {}: only F32, BF16 and F16 tensors can be read as "
                           "weights",
                           e.name, e.dtype));
  const auto bytes = read_bytes(e);
  std::vector<float> out(static_cast<std::size_t>(e.numel()));
  convert(bytes.data(), *e.strata, out.data(), DType::f32, out.size());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t at = 0;
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      user_fail("checkpoint", "'{}' cannot name a tensor in a safetensors file", t.name);
    if (!names.insert(t.name).second)
      user_fail("checkpoint", "tensor '{}' is written twice to {}", t.name, path);
    const std::string_view dt = safetensors_dtype_name(t.dtype);
    std::uint64_t numel = 1;
    for (auto d : t.shape) {
      STRATA_CHECK(d >= 0, "checkpoint", "tensor '{}' has a negative dimension", t.name);
      numel *= static_cast<std::uint64_t>(d);
    }
    const std::uint64_t bytes = numel * dtype_size(t.dtype);
    header[t.name] = {{"dtype", dt}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  const std::string tmp = path + std::string(kTmpSuffix);
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) user_fail("checkpoint", "cannot create '{}': {}", tmp, std::strerror(errno));
    const std::uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors) {
      std::uint64_t numel = 1;
      for (auto d : t.shape) numel *= static_cast<std::uint64_t>(d);
      out.write(static_cast<const char*>(t.data),
                static_cast<std::streamsize>(numel * dtype_size(t.dtype)));
    }
    out.close();
    if (!out) user_fail("checkpoint", "writing '{}' failed: {}", tmp, std::strerror(errno));
    fsync_file(tmp);
    rename_durable(tmp, path);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
}

}  // namespace strata::checkpoint
