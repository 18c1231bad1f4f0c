#include "framework/checkpoint/durable_fs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/core/error.hpp"

namespace strata::checkpoint {

namespace fs = std::filesystem;

namespace {

// Closes an fd on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void fsync_path(const std::string& path, int flags, const char* what) {
  Fd f{::open(path.c_str(), flags | O_CLOEXEC)};
  if (f.fd < 0)
    fail("checkpoint", "cannot open {} '{}' for fsync: {}", what, path, std::strerror(errno));
  if (::fsync(f.fd) != 0)
    fail("checkpoint", "fsync of {} '{}' failed: {}", what, path, std::strerror(errno));
  const int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0)
    fail("checkpoint", "close of {} '{}' failed: {}", what, path, std::strerror(errno));
}

}  // namespace

void fsync_file(const std::string& path) {
  fsync_path(path, O_RDONLY, "file");
}

void fsync_dir(const std::string& dir) {
  fsync_path(dir, O_RDONLY | O_DIRECTORY, "directory");
}

std::string parent_dir(const std::string& path) {
  const fs::path p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

void rename_durable(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    fail("checkpoint", "cannot rename '{}' to '{}': {}", from, to, std::strerror(errno));
  fsync_dir(parent_dir(to));
}

void write_file_atomic(const std::string& path, const std::string& content) {
  // Unique per process: two jobs sharing a log folder may write the same file at once.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (f.fd < 0) fail("checkpoint", "cannot create '{}': {}", tmp, std::strerror(errno));
    const char* p = content.data();
    std::size_t left = content.size();
    while (left > 0) {
      const ssize_t w = ::write(f.fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("checkpoint", "cannot write '{}': {}", tmp, std::strerror(errno));
      p += w;
      left -= static_cast<std::size_t>(w);
    }
    if (::fsync(f.fd) != 0)
      fail("checkpoint", "fsync of '{}' failed: {}", tmp, std::strerror(errno));
    const int fd = f.fd;
    f.fd = -1;
    if (::close(fd) != 0) fail("checkpoint", "close of '{}' failed: {}", tmp, std::strerror(errno));
  }
  rename_durable(tmp, path);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("checkpoint", "cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("checkpoint", "error reading '{}'", path);
  return ss.str();
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("checkpoint", "cannot create directory '{}': {}", dir, ec.message());
  if (!fs::is_directory(dir, ec)) fail("checkpoint", "'{}' exists and is not a directory", dir);
}

}  // namespace strata::checkpoint
