// Consolidated weight files: export a sharded checkpoint as one HDF5 file of fp32 weights under
// their global (PyTorch/nanoGPT) names, readable with h5py; and import such a file — or any HDF5
// file of float datasets, or a Hugging Face GPT-2 (safetensors, hf_gpt2.hpp) — as a step-0
// checkpoint to fine-tune from. (The HF export is hf_gpt2.hpp's export_hf_gpt2.)
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
  std::vector<std::string> exclude;  // HDF5: dataset names to leave out (e.g. a tied "lm_head.weight")
  std::int64_t n_head = 0;           // HF: attention heads when no config.json says (0: required there)
};

struct ImportResult {
  std::string format;  // "h5" or "hf"
  std::string step_dir;
  std::size_t params = 0;
  std::int64_t elements = 0;
  std::vector<std::string> skipped;  // non-float or excluded datasets
};

// HDF5 `file`: reads every floating-point dataset (nested groups become dotted names:
// /transformer/wte/weight → transformer.wte.weight) as f32. HF GPT-2 (`file` is a *.safetensors
// file or a directory holding model.safetensors, see is_hf_gpt2_path): read_hf_gpt2's weights in
// Strata's layout; the checkpoint's config is {"strata": {"model": ...}} with the HF shape, and
// its state.extra keeps "hf_config" (config.json) for export. Either way writes a complete
// one-rank step-0 checkpoint under root (manifest, `latest`) without optimizer state. Throws
// UserError if root already has a step-0 checkpoint or the file holds no float datasets.
ImportResult import_consolidated(const std::string& file, const std::string& root,
                                 const ImportOptions& options = {});

}  // namespace strata::checkpoint
