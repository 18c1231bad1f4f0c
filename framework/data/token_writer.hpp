// TokenFileWriter: writes a token file by streaming appends. Data goes to "<path>.tmp", which is
// fsynced and renamed onto <path> by commit(), so <path> never holds a half-written file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace strata::data {

class TokenFileWriter {
 public:
  // Creates "<path>.tmp" (replacing a stale one). bytes_per_token is 2 or 4; every appended
  // token must be < vocab_size. Throws UserError("data").
  TokenFileWriter(std::string path, std::uint32_t bytes_per_token, std::uint64_t vocab_size);
  // Without commit(), removes the temporary file and leaves <path> untouched.
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  void append(std::span<const std::uint32_t> tokens);
  void append(std::uint32_t token) { append(std::span<const std::uint32_t>(&token, 1)); }
  // Writes the header, fsyncs, renames "<path>.tmp" to <path> and fsyncs the directory.
  void commit();

  std::uint64_t count() const { return count_; }
  const std::string& path() const { return path_; }
  std::string temp_path() const { return path_ + ".tmp"; }

 private:
  void flush();
  void write_at(const unsigned char* p, std::size_t n, std::uint64_t offset);

  std::string path_;
  std::uint32_t bytes_per_token_;
  std::uint64_t vocab_size_;
  std::uint64_t count_ = 0;
  std::uint64_t file_offset_ = 0;  // bytes written to the temporary so far
  std::vector<unsigned char> buffer_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace strata::data
