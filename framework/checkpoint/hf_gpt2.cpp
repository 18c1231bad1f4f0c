#include "framework/checkpoint/hf_gpt2.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/safetensors.hpp"
#include "framework/checkpoint/slice.hpp"
#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "framework/core/json_limits.hpp"
#include "framework/core/output_path.hpp"

namespace strata::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "transformer.";

// A block's parameters: suffix after "h.N.", Conv1D (transposed), shape in Strata's layout as a
// function of C.
struct BlockParam {
  const char* suffix;
  bool conv1d;
  int rows_c, cols_c;  // Strata shape [rows_c*C, cols_c*C]; cols_c == 0 for a vector
};
constexpr BlockParam kBlock[] = {
    {"ln_1.weight", false, 1, 0},       {"ln_1.bias", false, 1, 0},
    {"attn.c_attn.weight", true, 3, 1}, {"attn.c_attn.bias", false, 3, 0},
    {"attn.c_proj.weight", true, 1, 1}, {"attn.c_proj.bias", false, 1, 0},
    {"ln_2.weight", false, 1, 0},       {"ln_2.bias", false, 1, 0},
    {"mlp.c_fc.weight", true, 4, 1},    {"mlp.c_fc.bias", false, 4, 0},
    {"mlp.c_proj.weight", true, 1, 4},  {"mlp.c_proj.bias", false, 1, 0},
};

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// "h.12.attn.c_attn.weight" → (12, "attn.c_attn.weight").
std::optional<std::pair<std::int64_t, std::string>> split_layer(std::string_view name) {
  if (!starts_with(name, "h.")) return std::nullopt;
  std::size_t i = 2;
  std::int64_t layer = 0;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  if (name[i] == '0' && i + 1 < name.size() &&
      std::isdigit(static_cast<unsigned char>(name[i + 1])))
    return std::nullopt;  // no leading zeros
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    if (layer > 1'000'000) return std::nullopt;
    layer = layer * 10 + (name[i] - '0');
  }
  if (i >= name.size() || name[i] != '.') return std::nullopt;
  return std::make_pair(layer, std::string(name.substr(i + 1)));
}

std::vector<std::int64_t> reversed(const Shape& s) {
  auto d = s.dims();
  std::reverse(d.begin(), d.end());
  return d;
}

std::string dims_str(const std::vector<std::int64_t>& d) {
  return Shape(d).str();
}

// dst[c, r] = src[r, c] for src [rows, cols].
std::vector<float> transpose(const std::vector<float>& src, std::int64_t rows, std::int64_t cols) {
  std::vector<float> out(src.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(c * rows + r)] = src[static_cast<std::size_t>(r * cols + c)];
  return out;
}

// The model options of HF's GPT2Config that change what the network computes: each must be the
// value Strata's GPT computes with (a missing key has HF's default, which is that value).
void check_hf_config(const nlohmann::json& c, const std::string& where, const Gpt2Shape& s) {
  if (!c.is_object()) user_fail("checkpoint", "{}: not a JSON object", where);
  auto str = [&](const char* k) -> std::optional<std::string> {
    auto it = c.find(k);
    if (it == c.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) user_fail("checkpoint", "{}: '{}' is not a string", where, k);
    return it->get<std::string>();
  };
  auto num = [&](const char* k) -> std::optional<double> {
    auto it = c.find(k);
    if (it == c.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) user_fail("checkpoint", "{}: '{}' is not a number", where, k);
    return it->get<double>();
  };
  auto flag = [&](const char* k) -> std::optional<bool> {
    auto it = c.find(k);
    if (it == c.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean()) user_fail("checkpoint", "{}: '{}' is not true or false", where, k);
    return it->get<bool>();
  };
  if (auto t = str("model_type"); t && *t != "gpt2")
    user_fail("checkpoint", "{}: model_type '{}' is not gpt2", where, *t);
  if (auto a = str("activation_function"); a && *a != "gelu_new" && *a != "gelu_pytorch_tanh")
    user_fail("checkpoint",
              "{}: activation_function '{}': Strata's GPT-2 computes GELU with the tanh "
              "approximation (gelu_new)",
              where, *a);
  if (auto e = num("layer_norm_epsilon"); e && std::abs(*e - 1e-5) > 1e-12)
    user_fail("checkpoint", "{}: layer_norm_epsilon {}: Strata's GPT-2 uses 1e-05", where, *e);
  if (auto n = num("n_inner"); n && *n != 4.0 * static_cast<double>(s.n_embd))
    user_fail("checkpoint", "{}: n_inner {}: Strata's GPT-2 MLP is 4 x n_embd = {}", where, *n,
              4 * s.n_embd);
  if (flag("tie_word_embeddings") == false)
    user_fail("checkpoint", "{}: tie_word_embeddings is false: Strata's GPT-2 ties lm_head to wte",
              where);
  if (flag("scale_attn_weights") == false)
    user_fail("checkpoint",
              "{}: scale_attn_weights is false: Strata scales attention by "
              "1/sqrt(head size)",
              where);
  if (flag("scale_attn_by_inverse_layer_idx") == true)
    user_fail("checkpoint", "{}: scale_attn_by_inverse_layer_idx is not implemented by Strata",
              where);
  if (flag("add_cross_attention") == true)
    user_fail("checkpoint", "{}: add_cross_attention is not implemented by Strata", where);
  auto dim = [&](const char* k, std::int64_t have, const char* from) {
    auto v = num(k);
    if (v && *v != static_cast<double>(have))
      user_fail("checkpoint", "{}: {} is {} but the weights have {} = {}", where, k, *v, from,
                have);
  };
  dim("n_embd", s.n_embd, "n_embd (wte's columns)");
  dim("n_layer", s.n_layer, "n_layer (h.N blocks)");
  dim("vocab_size", s.vocab_size, "vocab_size (wte's rows)");
  dim("n_positions", s.n_positions, "n_positions (wpe's rows)");
  if (auto h = num("n_head")) {
    if (*h < 1 || *h != std::floor(*h) || s.n_embd % static_cast<std::int64_t>(*h) != 0)
      user_fail("checkpoint", "{}: n_head {} does not divide n_embd {}", where, *h, s.n_embd);
  }
}

std::string model_file_of(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::string f = (fs::path(path) / kHfModelFile).string();
    if (fs::exists(f, ec)) return f;
    if (fs::exists(fs::path(path) / "model.safetensors.index.json", ec))
      user_fail("checkpoint",
                "{}: sharded safetensors (model.safetensors.index.json) are not supported; save "
                "the model as one file (save_pretrained(..., max_shard_size=\"100GB\"))",
                path);
    user_fail("checkpoint", "{}: no {} in this directory", path, kHfModelFile);
  }
  if (!fs::is_regular_file(path, ec)) user_fail("checkpoint", "'{}' is not a file", path);
  return path;
}

}  // namespace

bool is_hf_gpt2_path(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return fs::exists(fs::path(path) / kHfModelFile, ec) ||
           fs::exists(fs::path(path) / "model.safetensors.index.json", ec);
  return fs::path(path).extension() == ".safetensors";
}

std::optional<HfName> hf_name_of(const std::string& strata_name) {
  if (!starts_with(strata_name, kPrefix)) return std::nullopt;
  const std::string rest = strata_name.substr(std::strlen(kPrefix));
  if (rest == "wte.weight" || rest == "wpe.weight" || rest == "ln_f.weight" || rest == "ln_f.bias")
    return HfName{rest, false};
  const auto layer = split_layer(rest);
  if (!layer) return std::nullopt;
  for (const auto& b : kBlock)
    if (layer->second == b.suffix) return HfName{rest, b.conv1d};
  return std::nullopt;
}

std::vector<Gpt2Param> gpt2_params(const Gpt2Shape& s) {
  const std::int64_t C = s.n_embd;
  std::vector<Gpt2Param> out;
  out.push_back({"transformer.wte.weight", Shape{s.vocab_size, C}});
  out.push_back({"transformer.wpe.weight", Shape{s.n_positions, C}});
  for (std::int64_t l = 0; l < s.n_layer; ++l)
    for (const auto& b : kBlock)
      out.push_back({fmt::format("transformer.h.{}.{}", l, b.suffix),
                     b.cols_c ? Shape{b.rows_c * C, b.cols_c * C} : Shape{b.rows_c * C}});
  out.push_back({"transformer.ln_f.weight", Shape{C}});
  out.push_back({"transformer.ln_f.bias", Shape{C}});
  return out;
}

Gpt2Shape gpt2_shape_of(const std::vector<Gpt2Param>& params) {
  Gpt2Shape s;
  std::map<std::string, Shape> have;
  for (const auto& p : params) have[p.name] = p.shape;
  auto need = [&](const char* n) -> const Shape& {
    auto it = have.find(n);
    if (it == have.end() || it->second.rank() != 2)
      user_fail("checkpoint", "no 2-D parameter {}: not a GPT-2 checkpoint", n);
    return it->second;
  };
  const Shape& wte = need("transformer.wte.weight");
  const Shape& wpe = need("transformer.wpe.weight");
  s.vocab_size = wte[0];
  s.n_embd = wte[1];
  s.n_positions = wpe[0];
  for (const auto& p : params)
    if (const auto l = split_layer(std::string_view(p.name).substr(
            starts_with(p.name, kPrefix) ? std::strlen(kPrefix) : 0)))
      s.n_layer = std::max(s.n_layer, l->first + 1);
  std::vector<std::string> diffs;
  std::set<std::string> expected;
  for (const auto& e : gpt2_params(s)) {
    expected.insert(e.name);
    auto it = have.find(e.name);
    if (it == have.end())
      diffs.push_back("missing " + e.name);
    else if (it->second != e.shape)
      diffs.push_back(
          fmt::format("{} is {}, expected {}", e.name, it->second.str(), e.shape.str()));
  }
  for (const auto& p : params)
    if (!expected.count(p.name)) diffs.push_back("not a GPT-2 parameter: " + p.name);
  if (!diffs.empty()) {
    std::string list;
    for (std::size_t i = 0; i < diffs.size() && i < 5; ++i) list += (i ? "; " : "") + diffs[i];
    user_fail("checkpoint", "the parameters are not GPT-2's (n_embd {}, {} layers): {}{}", s.n_embd,
              s.n_layer, list,
              diffs.size() > 5 ? fmt::format("; and {} more", diffs.size() - 5) : "");
  }
  return s;
}

HfGpt2Weights read_hf_gpt2(const std::string& path) {
  HfGpt2Weights w;
  w.file = model_file_of(path);
  SafetensorsReader r(w.file);
  const std::string& f = w.file;

  // HF's LM-head model prefixes the trunk's names with "transformer."; GPT2Model does not.
  std::size_t prefixed = 0, trunk = 0;
  for (const auto& e : r.entries()) {
    if (e.name == "lm_head.weight") continue;
    ++trunk;
    prefixed += starts_with(e.name, kPrefix);
  }
  if (prefixed != 0 && prefixed != trunk)
    user_fail("checkpoint",
              "{}: {} of {} tensor names start with 'transformer.' and the rest do "
              "not",
              f, prefixed, trunk);
  const std::string pre = prefixed ? kPrefix : "";
  auto entry = [&](const std::string& hf) -> const SafetensorsEntry* { return r.find(pre + hf); };

  auto dims2 = [&](const char* hf) {
    const SafetensorsEntry* e = entry(hf);
    if (!e) user_fail("checkpoint", "{}: no tensor '{}{}': not a GPT-2 checkpoint", f, pre, hf);
    if (e->shape.size() != 2)
      user_fail("checkpoint", "{}: '{}' is {}, expected 2 dimensions", f, e->name,
                dims_str(e->shape));
    return e->shape;
  };
  const auto wte = dims2("wte.weight"), wpe = dims2("wpe.weight");
  w.shape.vocab_size = wte[0];
  w.shape.n_embd = wte[1];
  w.shape.n_positions = wpe[0];
  std::set<std::int64_t> layers;
  for (const auto& e : r.entries())
    if (starts_with(e.name, pre))
      if (const auto l = split_layer(std::string_view(e.name).substr(pre.size())))
        layers.insert(l->first);
  w.shape.n_layer = layers.empty() ? 0 : *layers.rbegin() + 1;
  if (w.shape.n_layer == 0) user_fail("checkpoint", "{}: no transformer blocks (h.N.*)", f);

  const fs::path cfg_path = fs::path(f).parent_path() / kHfConfigFile;
  std::error_code ec;
  if (fs::exists(cfg_path, ec)) {
    try {
      const std::string text = read_text_file(cfg_path.string());
      check_json_limits(text, cfg_path.string(), "checkpoint");  // depth, number sizes
      w.hf_config = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      user_fail("checkpoint", "{}: not valid JSON: {}", cfg_path.string(), e.what());
    }
    check_hf_config(w.hf_config, cfg_path.string(), w.shape);
    if (auto it = w.hf_config.find("n_head"); it != w.hf_config.end() && it->is_number())
      w.shape.n_head = it->get<std::int64_t>();
  }

  std::set<std::string> used;
  for (const Gpt2Param& p : gpt2_params(w.shape)) {
    const HfName hf = *hf_name_of(p.name);
    const SafetensorsEntry* e = entry(hf.name);
    if (!e)
      user_fail("checkpoint", "{}: no tensor '{}{}' (n_layer {})", f, pre, hf.name,
                w.shape.n_layer);
    const std::vector<std::int64_t> want = hf.transposed ? reversed(p.shape) : p.shape.dims();
    if (e->shape != want)
      user_fail("checkpoint", "{}: '{}' is {}, expected {} for n_embd {}{}", f, e->name,
                dims_str(e->shape), dims_str(want), w.shape.n_embd,
                hf.transposed ? " (a Conv1D weight, [in, out]; a Linear [out, in] tensor saved "
                                "under HF's name is rejected)"
                              : "");
    std::vector<float> v = r.read_f32(*e);
    if (hf.transposed) v = transpose(v, want[0], want[1]);
    w.params.push_back({p.name, p.shape, std::move(v)});
    used.insert(e->name);
  }
  for (const auto& e : r.entries()) {
    if (used.count(e.name)) continue;
    const std::string rest = starts_with(e.name, pre) ? e.name.substr(pre.size()) : e.name;
    const auto l = split_layer(rest);
    if (l && (l->second == "attn.bias" || l->second == "attn.masked_bias")) {
      w.skipped.push_back(e.name + " (attention mask buffer)");
      continue;
    }
    if (e.name == "lm_head.weight") {
      if (e.shape != wte)
        user_fail("checkpoint", "{}: lm_head.weight is {} but wte is {}", f, dims_str(e.shape),
                  dims_str(wte));
      if (r.read_f32(e) != w.params.front().values)
        user_fail("checkpoint",
                  "{}: lm_head.weight differs from wte.weight: Strata's GPT-2 ties "
                  "them (an untied head is not supported)",
                  f);
      w.skipped.push_back(e.name + " (tied to wte)");
      continue;
    }
    user_fail("checkpoint", "{}: unexpected tensor '{}': not part of GPT-2", f, e.name);
  }
  return w;
}

HfExportResult export_hf_gpt2(const std::string& dir, const std::string& out_dir,
                              const HfExportOptions& o) {
  HfExportResult res;
  // Where the files go, before any work: a directory (or a new one), its two files regular files
  // or new (each is written under a temporary name and renamed over what is there).
  check_output_dir(out_dir, "checkpoint", "output directory");
  std::error_code dir_ec;
  if (fs::is_directory(out_dir, dir_ec))
    for (const char* name : {kHfModelFile, kHfConfigFile})
      check_output_file((fs::path(out_dir) / name).string(), "checkpoint", "output file");
  res.step_dir = resolve_checkpoint_dir(dir);
  CheckpointReader reader(res.step_dir);
  const Manifest& m = reader.manifest();
  res.step = m.step;
  std::vector<Gpt2Param> have;
  for (const auto& p : m.params) have.push_back({p.name, p.shape});
  res.shape = gpt2_shape_of(have);

  // The HF config kept at import (TrainState.extra), else GPT-2's defaults.
  nlohmann::json cfg = nlohmann::json::object();
  if (auto it = m.state.extra.find("hf_config"); it != m.state.extra.end() && it->is_object())
    cfg = *it;
  std::int64_t n_head = o.n_head;
  if (n_head <= 0) {
    const nlohmann::json* model = nullptr;
    if (m.config.is_object() && m.config.contains("strata") && m.config["strata"].is_object() &&
        m.config["strata"].contains("model"))
      model = &m.config["strata"]["model"];
    if (model && model->contains("n_head") && (*model)["n_head"].is_number_integer())
      n_head = (*model)["n_head"].get<std::int64_t>();
    else if (cfg.contains("n_head") && cfg["n_head"].is_number_integer())
      n_head = cfg["n_head"].get<std::int64_t>();
  }
  if (n_head <= 0)
    user_fail("checkpoint",
              "{} does not say how many attention heads the model has: pass "
              "--n-head N",
              res.step_dir);
  if (res.shape.n_embd % n_head != 0)
    user_fail("checkpoint", "n_head {} does not divide n_embd {}", n_head, res.shape.n_embd);
  res.shape.n_head = n_head;
  check_hf_config(cfg, res.step_dir + " (its HF config)", res.shape);
  cfg["model_type"] = "gpt2";
  if (!cfg.contains("architectures")) cfg["architectures"] = {"GPT2LMHeadModel"};
  cfg["activation_function"] = cfg.value("activation_function", "gelu_new");
  cfg["layer_norm_epsilon"] = 1e-5;
  cfg["n_embd"] = res.shape.n_embd;
  cfg["n_head"] = n_head;
  cfg["n_layer"] = res.shape.n_layer;
  cfg["n_positions"] = res.shape.n_positions;
  if (cfg.contains("n_ctx")) cfg["n_ctx"] = res.shape.n_positions;
  cfg["vocab_size"] = res.shape.vocab_size;
  cfg["tie_word_embeddings"] = true;
  cfg["torch_dtype"] = o.dtype == DType::f32    ? "float32"
                       : o.dtype == DType::bf16 ? "bfloat16"
                                                : "float16";
  (void)safetensors_dtype_name(o.dtype);  // rejects other dtypes before anything is written

  std::vector<std::vector<unsigned char>> data;
  std::vector<SafetensorsTensor> tensors;
  for (const Gpt2Param& p : gpt2_params(res.shape)) {
    const HfName hf = *hf_name_of(p.name);
    std::vector<float> v = reader.read_f32(kParam, p.name);
    std::vector<std::int64_t> dims = p.shape.dims();
    if (hf.transposed) {
      v = transpose(v, dims[0], dims[1]);
      std::swap(dims[0], dims[1]);
    }
    std::vector<unsigned char> bytes(v.size() * dtype_size(o.dtype));
    convert(v.data(), DType::f32, bytes.data(), o.dtype, v.size());
    data.push_back(std::move(bytes));
    tensors.push_back({kPrefix + hf.name, o.dtype, dims, nullptr});
    res.elements += p.shape.numel();
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].data = data[i].data();
  res.tensors = tensors.size();

  make_dirs(out_dir);
  res.model_file = (fs::path(out_dir) / kHfModelFile).string();
  res.config_file = (fs::path(out_dir) / kHfConfigFile).string();
  write_safetensors(res.model_file, tensors, {{"format", "pt"}});
  write_file_atomic(res.config_file, cfg.dump(2) + "\n");
  return res;
}

}  // namespace strata::checkpoint
