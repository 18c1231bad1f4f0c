// TokenFile: a Strata token file opened read-only through mmap. Opening validates the header
// and the file size; token values are checked against the vocabulary as they are read (or all
// at once on request).
#pragma once

#include <cstdint>
#include <string>

#include "framework/data/mapped_file.hpp"
#include "framework/data/token_format.hpp"

namespace strata::data {

class TokenFile {
 public:
  // Opens and validates `path`; with check_all_tokens every token is compared with vocab_size
  // now (one pass over the file) instead of lazily in read(). Throws UserError("data").
  explicit TokenFile(const std::string& path, bool check_all_tokens = false);

  const std::string& path() const { return map_.path(); }
  const TokenFileHeader& header() const { return header_; }
  std::uint64_t size() const { return header_.token_count; }  // number of tokens
  std::uint64_t vocab_size() const { return header_.vocab_size; }
  std::uint32_t bytes_per_token() const { return header_.bytes_per_token; }

  // Token at index i (no vocabulary check; i < size()).
  std::uint32_t at(std::uint64_t i) const;
  // out[j] = token[first + j] for j < n, each checked against vocab_size (UserError naming the
  // file, the index and the value when out of range). Requires first + n <= size().
  void read(std::uint64_t first, std::uint64_t n, std::int32_t* out) const;
  // Scans every token; throws UserError at the first one >= vocab_size.
  void check_tokens() const;

 private:
  [[noreturn]] void out_of_range(std::uint64_t index, std::uint32_t value) const;

  MappedFile map_;
  TokenFileHeader header_;
  const unsigned char* tokens_ = nullptr;
};

}  // namespace strata::data
