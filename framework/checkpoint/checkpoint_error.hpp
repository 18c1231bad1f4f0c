// CheckpointError: a checkpoint that is missing, incomplete or corrupt — bad input (a UserError:
// exit status 1, and `strata run` does not restart a job that fails on it). Carries the file and
// the dataset at fault so a caller can report them and fall back to an older checkpoint.
#pragma once

#include <string>

#include "framework/core/error.hpp"

namespace strata::checkpoint {

class CheckpointError : public UserError {
 public:
  // what() is "[checkpoint] <file>: dataset <dataset>: <message>" (parts left out when empty).
  CheckpointError(std::string file, std::string dataset, const std::string& message);
  const std::string& file() const noexcept { return file_; }
  const std::string& dataset() const noexcept { return dataset_; }

 private:
  std::string file_;
  std::string dataset_;
};

// The file system ran out of space (ENOSPC) or quota (EDQUOT) while writing `path`. Raised by
// the low-level writers; the checkpoint writer turns it into one line naming the directory and
// the bytes needed (space.hpp).
class NoSpaceError : public Error {
 public:
  NoSpaceError(std::string path, const std::string& message)
      : Error("checkpoint", message), path_(std::move(path)) {}
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

// Whether an errno means the file system is out of space or quota.
bool is_no_space_errno(int err);

// Throws NoSpaceError (for ENOSPC/EDQUOT) or Error "[checkpoint] <message>: <strerror(err)>".
[[noreturn]] void io_fail(int err, const std::string& path, const std::string& message);

// Throws CheckpointError(file, dataset, formatted message).
template <typename... Args>
[[noreturn]] void corrupt(const std::string& file, const std::string& dataset,
                          fmt::format_string<Args...> f, Args&&... args) {
  throw CheckpointError(file, dataset, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace strata::checkpoint
