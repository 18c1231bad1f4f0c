// verify_checkpoint: checks a step directory against its manifest and collects every fault
// (missing, truncated or foreign rank files, datasets whose attributes, extent, type or checksum
// disagree with the manifest, datasets the manifest does not list) instead of stopping at the
// first. `strata ckpt verify` and find_latest() use it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/checkpoint/manifest.hpp"

namespace strata::checkpoint {

enum class VerifyLevel {
  structure,  // manifest, every file present with the right size, every dataset's description
  full,       // structure plus the checksum of every byte
};

struct VerifyReport {
  std::string step_dir;
  std::optional<Manifest> manifest;  // when it could be read
  std::vector<std::string> faults;   // "<file>: dataset <path>: <what is wrong>"
  std::size_t files_checked = 0;
  std::size_t datasets_checked = 0;
  std::uint64_t bytes_checksummed = 0;
  bool ok() const { return faults.empty(); }
};

VerifyReport verify_checkpoint(const std::string& step_dir, VerifyLevel level = VerifyLevel::full);

}  // namespace strata::checkpoint
