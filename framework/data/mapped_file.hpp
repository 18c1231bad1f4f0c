// A whole file mapped read-only into memory (RAII over open/mmap/munmap). Pages are read from
// disk on first touch, so a large dataset is streamed, never loaded whole.
#pragma once

#include <cstddef>
#include <string>

namespace strata::data {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path` read-only. Throws UserError("data") when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release() noexcept;

  std::string path_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace strata::data
