// CheckpointError: a checkpoint that is missing, incomplete or corrupt. Carries the file and the
// dataset at fault so a caller can report them and fall back to an older checkpoint.
#pragma once

#include <string>

#include "framework/core/error.hpp"

namespace strata::checkpoint {

class CheckpointError : public Error {
 public:
  // what() is "[checkpoint] <file>: dataset <dataset>: <message>" (parts left out when empty).
  CheckpointError(std::string file, std::string dataset, const std::string& message);
  const std::string& file() const noexcept { return file_; }
  const std::string& dataset() const noexcept { return dataset_; }

 private:
  std::string file_;
  std::string dataset_;
};

// Throws CheckpointError(file, dataset, formatted message).
template <typename... Args>
[[noreturn]] void corrupt(const std::string& file, const std::string& dataset,
                          fmt::format_string<Args...> f, Args&&... args) {
  throw CheckpointError(file, dataset, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace strata::checkpoint
