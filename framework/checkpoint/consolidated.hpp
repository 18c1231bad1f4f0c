// Consolidated weight files: export a sharded checkpoint as one HDF5 file of fp32 weights under
// their global (PyTorch/nanoGPT) names, readable with h5py; and import such a file — or any HDF5
// file of float datasets — as a step-0 checkpoint to fine-tune from.
//
// Export file layout: root attributes format = "strata-export", format_version = 1, step,
// strata_version, source (the step directory), config (JSON text), model (JSON text of the
// config's strata.model, when present); one f32 dataset per parameter at /<name> with the
// parameter's global shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::checkpoint {

inline constexpr const char* kExportFormat = "strata-export";
inline constexpr std::int64_t kExportFormatVersion = 1;

struct ExportResult {
  std::string step_dir;
  std::string output;
  std::int64_t step = 0;
  std::size_t params = 0;
  std::int64_t elements = 0;
};

// dir: a step directory, or a checkpoint root (the step `latest` names). Every dataset read is
// checksum-verified. The output is written under a temporary name and renamed when complete.
ExportResult export_consolidated(const std::string& dir, const std::string& output);

struct ImportOptions {
  std::vector<std::string> exclude;  // dataset names to leave out (e.g. a tied "lm_head.weight")
};

struct ImportResult {
  std::string step_dir;
  std::size_t params = 0;
  std::int64_t elements = 0;
  std::vector<std::string> skipped;  // non-float or excluded datasets
};

// Reads every floating-point dataset of `file` (nested groups become dotted names:
// /transformer/wte/weight → transformer.wte.weight) as f32 and writes a complete one-rank step-0
// checkpoint under root (manifest, `latest`). Throws UserError if root already has a step-0
// checkpoint or the file holds no float datasets.
ImportResult import_consolidated(const std::string& file, const std::string& root,
                                 const ImportOptions& options = {});

}  // namespace strata::checkpoint
