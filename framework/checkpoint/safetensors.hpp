// The safetensors file format (Hugging Face's): read and validated without trusting the file,
// and written. Layout: u64 little-endian header length N, N bytes of JSON (padded with spaces),
// then the tensors' raw little-endian bytes, each tensor at [begin, end) of that buffer.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "framework/core/dtype.hpp"

namespace strata::checkpoint {

// Headers larger than this are refused (the reference implementation's limit).
inline constexpr std::uint64_t kSafetensorsMaxHeader = 100ull << 20;

struct SafetensorsEntry {
  std::string name;
  std::string dtype;            // as in the file: "F32", "BF16", "I64", ...
  std::optional<DType> strata;  // F32, BF16, F16 (the dtypes Strata reads and writes)
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range in the data buffer
  std::int64_t numel() const;
};

// Opens a file and validates its header: length, JSON syntax, unique names, known dtypes, shapes
// that match their byte ranges, ranges inside the buffer that neither overlap nor leave holes,
// `__metadata__` of strings. Every problem is a one-line UserError("checkpoint") naming the file.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::string path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // by offset
  const SafetensorsEntry* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor's bytes exactly as stored.
  std::vector<unsigned char> read_bytes(const SafetensorsEntry& e) const;
  // The tensor's values as f32 (F32 as is, BF16/F16 widened exactly); other dtypes throw.
  std::vector<float> read_f32(const SafetensorsEntry& e) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t data_offset_ = 0;  // 8 + N
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: `data` holds numel(shape) elements of dtype (f32, bf16 or f16).
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
};

// Writes `path` (through path.tmp, fsynced and renamed): the header lists __metadata__ first,
// then the tensors in the given order, stored back to back in that order; the header is padded
// with spaces so the data starts at a multiple of 8 bytes. Throws UserError on a bad name, a
// duplicate or an unsupported dtype.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// "F32" / "BF16" / "F16" for the dtypes above.
std::string_view safetensors_dtype_name(DType t);

}  // namespace strata::checkpoint
