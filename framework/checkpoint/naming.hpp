// Names inside a checkpoint root: step directories ("step_00000100"), rank files
// ("rank_00003.h5"), the manifest and the `latest` pointer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata::checkpoint {

inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kLatestName = "latest";
inline constexpr std::string_view kTmpSuffix = ".tmp";

std::string step_dir_name(std::int64_t step);                            // "step_00000100"
std::optional<std::int64_t> parse_step_dir_name(std::string_view name);  // nullopt if not one
std::string rank_file_name(int rank);                                    // "rank_00003.h5"
std::optional<int> parse_rank_file_name(std::string_view name);          // nullopt if not one
std::string join_path(const std::string& dir, std::string_view name);

}  // namespace strata::checkpoint
