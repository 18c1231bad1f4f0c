#include "framework/data/token_file.hpp"

#include "framework/core/error.hpp"

namespace strata::data {

namespace {

inline std::uint32_t load_token(const unsigned char* p, std::uint32_t bytes) {
  if (bytes == 2) {
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8);
  }
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

}  // namespace

TokenFile::TokenFile(const std::string& path, bool check_all_tokens) : map_(path) {
  if (map_.size() < kTokenHeaderBytes) {
    user_fail("data", "'{}' is too short to be a token file: {} bytes, the header alone is {}",
              path, map_.size(), kTokenHeaderBytes);
  }
  header_ = decode_header(map_.data(), path);
  const std::uint64_t expected = header_.expected_file_size();
  if (map_.size() < expected) {
    user_fail("data",
              "token file '{}' is truncated: its header promises {} tokens of {} bytes, so the "
              "file should be {} bytes, but it is {} bytes",
              path, header_.token_count, header_.bytes_per_token, expected, map_.size());
  }
  if (map_.size() > expected) {
    user_fail("data",
              "token file '{}' has {} bytes after its {} tokens: the file should be {} bytes, "
              "but it is {} bytes",
              path, map_.size() - expected, header_.token_count, expected, map_.size());
  }
  tokens_ = map_.data() + kTokenHeaderBytes;
  if (check_all_tokens) check_tokens();
}

std::uint32_t TokenFile::at(std::uint64_t i) const {
  STRATA_CHECK(i < header_.token_count, "data", "token index {} out of range [0, {}) in '{}'", i,
               header_.token_count, path());
  return load_token(tokens_ + i * header_.bytes_per_token, header_.bytes_per_token);
}

void TokenFile::out_of_range(std::uint64_t index, std::uint32_t value) const {
  user_fail("data", "token file '{}': token {} at index {} is out of range for vocabulary size {}",
            path(), value, index, header_.vocab_size);
}

void TokenFile::read(std::uint64_t first, std::uint64_t n, std::int32_t* out) const {
  STRATA_CHECK(first <= header_.token_count && n <= header_.token_count - first, "data",
               "read of tokens [{}, {}) past the end of '{}' ({} tokens)", first, first + n, path(),
               header_.token_count);
  const std::uint32_t bpt = header_.bytes_per_token;
  const std::uint64_t vocab = header_.vocab_size;
  const unsigned char* p = tokens_ + first * bpt;
  for (std::uint64_t j = 0; j < n; ++j, p += bpt) {
    const std::uint32_t v = load_token(p, bpt);
    if (v >= vocab) [[unlikely]]
      out_of_range(first + j, v);
    out[j] = static_cast<std::int32_t>(v);
  }
}

void TokenFile::check_tokens() const {
  const std::uint32_t bpt = header_.bytes_per_token;
  const std::uint64_t vocab = header_.vocab_size;
  const unsigned char* p = tokens_;
  for (std::uint64_t i = 0; i < header_.token_count; ++i, p += bpt) {
    const std::uint32_t v = load_token(p, bpt);
    if (v >= vocab) [[unlikely]]
      out_of_range(i, v);
  }
}

}  // namespace strata::data
