#include "framework/checkpoint/checkpoint_error.hpp"

#include <cerrno>
#include <cstring>

namespace strata::checkpoint {

namespace {

std::string compose(const std::string& file, const std::string& dataset,
                    const std::string& message) {
  std::string out;
  if (!file.empty()) out += file + ": ";
  if (!dataset.empty()) out += "dataset " + dataset + ": ";
  return out + message;
}

}  // namespace

CheckpointError::CheckpointError(std::string file, std::string dataset, const std::string& message)
    : UserError("checkpoint", compose(file, dataset, message)),
      file_(std::move(file)),
      dataset_(std::move(dataset)) {}

bool is_no_space_errno(int err) {
  return err == ENOSPC || err == EDQUOT;
}

void io_fail(int err, const std::string& path, const std::string& message) {
  const std::string text = fmt::format("{}: {}", message, std::strerror(err));
  if (is_no_space_errno(err)) throw NoSpaceError(path, text);
  throw Error("checkpoint", text);
}

}  // namespace strata::checkpoint
