// Crash-safe file operations for the commit protocol: fsync of files and directories, rename that
// survives a power cut, and whole-file writes that are all-or-nothing (temporary name, fsync,
// rename, fsync of the directory).
#pragma once

#include <functional>
#include <string>
#include <utility>

namespace strata::checkpoint {

// Owns a file descriptor and closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1);
  int release() { return std::exchange(fd_, -1); }
  // Closes now; throws (NoSpaceError for ENOSPC) when close reports an error, naming `path`.
  void close(const std::string& path);

 private:
  int fd_ = -1;
};

// Flushes a file's data (and metadata) to stable storage.
void fsync_file(const std::string& path);
// Flushes a directory's entries (makes creations and renames inside it durable).
void fsync_dir(const std::string& dir);
// rename(from, to), then fsync of to's directory.
void rename_durable(const std::string& from, const std::string& to);
// Writes content to path.tmp, fsyncs it, renames it over path and fsyncs the directory
// (`before_rename`, if set, runs between the two: fault injection). Out of space: NoSpaceError
// naming the directory and the bytes, and no temporary file left.
void write_file_atomic(const std::string& path, const std::string& content,
                       const std::function<void()>& before_rename = {});
// Whole file as a string; throws strata::Error naming the file.
std::string read_text_file(const std::string& path);
// mkdir -p; an existing directory is fine, an existing non-directory is an error.
void make_dirs(const std::string& dir);
// Directory containing path ("." for a bare name).
std::string parent_dir(const std::string& path);

}  // namespace strata::checkpoint
