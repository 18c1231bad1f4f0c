#include "framework/checkpoint/checkpoint_error.hpp"

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
    : Error("checkpoint", compose(file, dataset, message)),
      file_(std::move(file)),
      dataset_(std::move(dataset)) {}

}  // namespace strata::checkpoint
