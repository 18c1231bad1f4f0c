#include "framework/data/token_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "framework/core/error.hpp"
#include "framework/data/token_format.hpp"

namespace strata::data {

namespace {
constexpr std::size_t kBufferBytes = 1 << 20;
}

TokenFileWriter::TokenFileWriter(std::string path, std::uint32_t bytes_per_token,
                                 std::uint64_t vocab_size)
    : path_(std::move(path)), bytes_per_token_(bytes_per_token), vocab_size_(vocab_size) {
  check_token_layout(bytes_per_token, vocab_size, path_);
  const std::string tmp = temp_path();
  fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) user_fail("data", "cannot create '{}': {}", tmp, std::strerror(errno));
  buffer_.reserve(kBufferBytes);
  // Placeholder header (count 0); commit() rewrites it with the final count.
  TokenFileHeader h;
  h.bytes_per_token = bytes_per_token_;
  h.vocab_size = vocab_size_;
  const auto bytes = encode_header(h);
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

TokenFileWriter::~TokenFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path().c_str());
}

void TokenFileWriter::append(std::span<const std::uint32_t> tokens) {
  STRATA_CHECK(!committed_, "data", "append to '{}' after commit", path_);
  for (std::size_t i = 0; i < tokens.size(); ++i) {  // check first: a bad token writes nothing
    if (tokens[i] >= vocab_size_) {
      user_fail("data", "writing '{}': token {} at index {} is out of range for vocabulary size {}",
                path_, tokens[i], count_ + i, vocab_size_);
    }
  }
  for (const std::uint32_t v : tokens) {
    buffer_.push_back(static_cast<unsigned char>(v));
    buffer_.push_back(static_cast<unsigned char>(v >> 8));
    if (bytes_per_token_ == 4) {
      buffer_.push_back(static_cast<unsigned char>(v >> 16));
      buffer_.push_back(static_cast<unsigned char>(v >> 24));
    }
    if (buffer_.size() >= kBufferBytes) flush();
  }
  count_ += tokens.size();
}

void TokenFileWriter::write_at(const unsigned char* p, std::size_t n, std::uint64_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      user_fail("data", "writing '{}' failed: {}", temp_path(), std::strerror(errno));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
    offset += static_cast<std::uint64_t>(w);
  }
}

void TokenFileWriter::flush() {
  write_at(buffer_.data(), buffer_.size(), file_offset_);
  file_offset_ += buffer_.size();
  buffer_.clear();
}

void TokenFileWriter::commit() {
  STRATA_CHECK(!committed_, "data", "'{}' committed twice", path_);
  flush();
  TokenFileHeader h;
  h.bytes_per_token = bytes_per_token_;
  h.vocab_size = vocab_size_;
  h.token_count = count_;
  const auto bytes = encode_header(h);
  write_at(bytes.data(), bytes.size(), 0);
  if (::fsync(fd_) != 0)
    user_fail("data", "fsync of '{}' failed: {}", temp_path(), std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) user_fail("data", "closing '{}' failed: {}", temp_path(), std::strerror(errno));
  if (std::rename(temp_path().c_str(), path_.c_str()) != 0) {
    user_fail("data", "cannot rename '{}' to '{}': {}", temp_path(), path_, std::strerror(errno));
  }
  committed_ = true;
  // Make the rename itself durable.
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace strata::data
