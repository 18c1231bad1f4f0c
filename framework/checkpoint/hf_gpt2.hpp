// Hugging Face's GPT-2 layout (GPT2LMHeadModel's safetensors + config.json) ↔ Strata's nanoGPT
// layout. HF stores the attention and MLP projections as Conv1D weights [in, out]; nanoGPT's
// Linear is [out, in]: every `c_attn`, `c_proj` and `c_fc` weight is transposed — identified by
// its name, never by its shape (attn.c_proj is square) — and every other tensor's shape is checked
// both ways. Attention mask buffers (`attn.bias`, `attn.masked_bias`) are skipped; `lm_head` is
// tied to `wte` (an untied head must equal it).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/core/dtype.hpp"
#include "framework/core/shape.hpp"

namespace strata::checkpoint {

inline constexpr const char* kHfModelFile = "model.safetensors";
inline constexpr const char* kHfConfigFile = "config.json";

struct Gpt2Shape {
  std::int64_t n_layer = 0, n_head = 0, n_embd = 0, vocab_size = 0, n_positions = 0;
};

// Where a Strata (nanoGPT) parameter lives in HF's layout.
struct HfName {
  std::string name;         // without the "transformer." prefix HF's LM-head model adds
  bool transposed = false;  // a Conv1D weight: HF [in, out] = Strata [out, in] transposed
};
// nullopt for names that are not GPT-2 parameters.
std::optional<HfName> hf_name_of(const std::string& strata_name);

// Strata's GPT-2 parameters for a shape, in the model's order, with their nanoGPT shapes.
struct Gpt2Param {
  std::string name;
  Shape shape;
};
std::vector<Gpt2Param> gpt2_params(const Gpt2Shape& s);

// A parameter in Strata's names and layout.
struct NamedWeights {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

struct HfGpt2Weights {
  std::string file;                  // the safetensors file read
  Gpt2Shape shape;                   // n_head from config.json (0 without one)
  nlohmann::json hf_config;          // config.json beside the file, or null
  std::vector<NamedWeights> params;  // every gpt2_params(shape) entry, in order
  std::vector<std::string> skipped;  // buffers left out, with why
};

// `path` is a .safetensors file or a directory holding model.safetensors (config.json is read
// from the same directory when present). Tensor names may carry HF's "transformer." prefix or
// not. Checks: every tensor is a known GPT-2 tensor with the shape the model's dimensions imply
// (Conv1D weights [in, out]), no layer is missing, config.json (when present) agrees with the
// tensors and describes a model Strata computes identically (GELU tanh, LayerNorm eps 1e-5, tied
// head, no cross-attention, ...). Every problem is a one-line UserError("checkpoint").
HfGpt2Weights read_hf_gpt2(const std::string& path);

// Whether `path` names HF input: a *.safetensors file or a directory with model.safetensors.
bool is_hf_gpt2_path(const std::string& path);

// The dimensions of a GPT-2 given its parameters in Strata's names (n_head stays 0: shapes do not
// tell it). Throws UserError listing what does not fit GPT-2 (missing, extra, misshapen).
Gpt2Shape gpt2_shape_of(const std::vector<Gpt2Param>& params);

struct HfExportOptions {
  DType dtype = DType::f32;  // f32, bf16 or f16 in the file
  std::int64_t n_head = 0;   // 0: from the checkpoint's config
};

struct HfExportResult {
  std::string step_dir;
  std::string model_file, config_file;
  std::int64_t step = 0;
  std::size_t tensors = 0;
  std::int64_t elements = 0;
  Gpt2Shape shape;
};

// Writes a Strata checkpoint's GPT-2 weights as `out_dir`/model.safetensors (HF names with the
// "transformer." prefix, Conv1D weights transposed, no lm_head: GPT2LMHeadModel ties it) and
// `out_dir`/config.json, which `GPT2LMHeadModel.from_pretrained(out_dir)` loads. `dir` is a step
// directory or a checkpoint root. The HF config saved at import (if any) is kept, with the
// shape fields set from the weights.
HfExportResult export_hf_gpt2(const std::string& dir, const std::string& out_dir,
                              const HfExportOptions& options = {});

}  // namespace strata::checkpoint
