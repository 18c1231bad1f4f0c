#include "framework/checkpoint/durable_fs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/space.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {

namespace fs = std::filesystem;

namespace {

void fsync_path(const std::string& path, int flags, const char* what) {
  UniqueFd f(::open(path.c_str(), flags | O_CLOEXEC));
  if (!f.valid())
    fail("checkpoint", "cannot open {} '{}' for fsync: {}", what, path, std::strerror(errno));
  if (::fsync(f.get()) != 0)
    io_fail(errno, path, fmt::format("fsync of {} '{}' failed", what, path));
  f.close(path);
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

void UniqueFd::close(const std::string& path) {
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0) io_fail(errno, path, fmt::format("close of '{}' failed", path));
}

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

void write_file_atomic(const std::string& path, const std::string& content,
                       const std::function<void()>& before_rename) {
  // Unique per process: two jobs sharing a log folder may write the same file at once.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    // Out of space: one line naming the directory and the bytes, and no temporary file left.
    auto failed = [&](int err, const char* what) {
      ::unlink(tmp.c_str());
      if (is_no_space_errno(err))
        no_space(parent_dir(path), fmt::format("'{}'", fs::path(path).filename().string()),
                 content.size(), false);
      io_fail(err, tmp, fmt::format("{} '{}'", what, tmp));
    };
    if (!f.valid()) failed(errno, "cannot create");
    const char* p = content.data();
    std::size_t left = content.size();
    while (left > 0) {
      const ssize_t w = ::write(f.get(), p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) failed(errno, "cannot write");
      if (w == 0) fail("checkpoint", "cannot write '{}': no progress", tmp);
      p += w;
      left -= static_cast<std::size_t>(w);
    }
    if (::fsync(f.get()) != 0) failed(errno, "fsync failed for");
    if (::close(f.release()) != 0) failed(errno, "close failed for");
  }
  if (before_rename) before_rename();
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
