// Hugging Face GPT-2 import/export against tests/fixtures/hf_gpt2_tiny (made by
// tools/pytorch/make_hf_gpt2_fixture.py with transformers' GPT2LMHeadModel): import → Strata's
// forward gives PyTorch's logits → export gives bitwise the same tensors; layouts are decided by
// name (the square attn.c_proj too), shapes and configs are checked both ways.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/consolidated.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/hf_gpt2.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/safetensors.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/param_store.hpp"
#include "tests/support/fixture.hpp"

namespace strata::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::throws_with;

const std::string kFixture = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/hf_gpt2_tiny";

// name → (dtype, shape, bytes) of every tensor in a safetensors file.
struct Raw {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;
  bool operator==(const Raw&) const = default;
};
std::map<std::string, Raw> tensors_of(const std::string& file) {
  SafetensorsReader r(file);
  std::map<std::string, Raw> out;
  for (const auto& e : r.entries()) out[e.name] = Raw{e.dtype, e.shape, r.read_bytes(e)};
  return out;
}

// Copies the fixture's tensors through `edit` into a new directory with the fixture's config.
std::string edited_copy(const TempDir& tmp, const std::string& name,
                        const std::function<void(std::map<std::string, Raw>&)>& edit,
                        const std::function<void(nlohmann::json&)>& edit_config = {}) {
  auto t = tensors_of(kFixture + "/model.safetensors");
  edit(t);
  const std::string dir = tmp / name;
  fs::create_directories(dir);
  std::vector<SafetensorsTensor> list;
  for (const auto& [n, raw] : t)
    list.push_back({n, raw.dtype == "F32" ? DType::f32 : DType::bf16, raw.shape, raw.bytes.data()});
  write_safetensors(dir + "/model.safetensors", list, {{"format", "pt"}});
  auto cfg = nlohmann::json::parse(read_text_file(kFixture + "/config.json"));
  if (edit_config) edit_config(cfg);
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  return dir;
}

// [rows, cols] f32 bytes transposed.
std::vector<unsigned char> transposed(const Raw& r) {
  const std::int64_t R = r.shape[0], C = r.shape[1];
  std::vector<unsigned char> out(r.bytes.size());
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t j = 0; j < C; ++j)
      std::memcpy(&out[static_cast<std::size_t>((j * R + i) * 4)],
                  &r.bytes[static_cast<std::size_t>((i * C + j) * 4)], 4);
  return out;
}

TEST(HfGpt2, ImportedWeightsGivePyTorchsLogits) {
  TempDir tmp;
  const ImportResult ir = import_consolidated(kFixture, tmp / "ck");
  EXPECT_EQ(ir.format, "hf");
  EXPECT_EQ(ir.params, 2u + 2 * 12 + 2);
  CheckpointReader reader(ir.step_dir);
  const auto& model = reader.manifest().config["strata"]["model"];
  nn::GptConfig gc;
  gc.vocab_size = model["vocab_size"];
  gc.block_size = model["block_size"];
  gc.n_layer = model["n_layer"];
  gc.n_head = model["n_head"];
  gc.n_embd = model["n_embd"];
  EXPECT_EQ(gc.vocab_size, 64);
  EXPECT_EQ(gc.block_size, 16);
  EXPECT_EQ(gc.n_head, 4);
  EXPECT_TRUE(reader.manifest().state.optimizer.empty()) << "no optimizer state: a fresh start";
  EXPECT_EQ(reader.manifest().state.extra["hf_config"]["n_head"], 4);

  nn::Gpt gpt(gc);
  nn::ParamStore store(gpt.units(), nn::ParamStoreOptions{DType::f32, DType::f32, 1, {}});
  for (nn::Parameter* p : store.parameters()) {
    std::vector<float> v = reader.read_f32(kParam, p->name);
    ASSERT_EQ(static_cast<std::int64_t>(v.size()), p->shape.numel()) << p->name;
    Tensor src(Storage::wrap(v.data(), v.size() * 4, Device::cpu()), DType::f32, p->shape,
               p->shape.contiguous_strides());
    p->value.copy_from(src);
  }
  const test::Fixture fx = test::Fixture::load(kFixture + "/expected.fx");
  const auto shape = fx.shape("tokens");
  const int B = static_cast<int>(shape[0]), T = static_cast<int>(shape[1]);
  auto tokens = fx.i32("tokens");
  nn::Context ctx;
  const std::vector<float> got = gpt.logits(ctx, tokens.data(), B, T).to_vector();
  const std::vector<float> want = fx.f32("logits");
  ASSERT_EQ(got.size(), want.size());
  // Same f32 math in a different order (BLAS blocking, fused attention): measured max |error|
  // 9e-8 on logits of magnitude ~0.5, so 1e-5 leaves a 100x margin; an untransposed attn.c_proj
  // (the square matrix) moves the logits by 8e-2.
  double err = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
  EXPECT_LT(err, 1e-5);
}

TEST(HfGpt2, ExportGivesBackBitwiseTheSameTensors) {
  TempDir tmp;
  import_consolidated(kFixture, tmp / "ck");
  const HfExportResult r = export_hf_gpt2(tmp / "ck", tmp / "out");
  EXPECT_EQ(r.step, 0);
  EXPECT_EQ(r.shape.n_head, 4);
  EXPECT_EQ(tensors_of(r.model_file), tensors_of(kFixture + "/model.safetensors"));
  SafetensorsReader out(r.model_file);
  EXPECT_EQ(out.metadata().at("format"), "pt");  // from_pretrained requires it
  const auto cfg = nlohmann::json::parse(read_text_file(r.config_file));
  const auto ref = nlohmann::json::parse(read_text_file(kFixture + "/config.json"));
  for (const char* k : {"n_layer", "n_head", "n_embd", "n_positions", "vocab_size", "model_type",
                        "activation_function", "layer_norm_epsilon", "architectures"})
    EXPECT_EQ(cfg[k], ref[k]) << k;
}

TEST(HfGpt2, Bf16RoundTripIsBitwise) {
  TempDir tmp;
  import_consolidated(kFixture + "/bf16/model.safetensors", tmp / "ck");
  HfExportOptions o;
  o.dtype = DType::bf16;
  const HfExportResult r = export_hf_gpt2(tmp / "ck", tmp / "out", o);
  EXPECT_EQ(tensors_of(r.model_file), tensors_of(kFixture + "/bf16/model.safetensors"));
  EXPECT_EQ(nlohmann::json::parse(read_text_file(r.config_file))["torch_dtype"], "bfloat16");
}

TEST(HfGpt2, SquareCProjIsTransposedByName) {
  const HfGpt2Weights w = read_hf_gpt2(kFixture);
  const auto raw = tensors_of(kFixture + "/model.safetensors");
  for (const char* n : {"h.0.attn.c_proj.weight", "h.1.attn.c_proj.weight"}) {
    const Raw& file = raw.at(std::string("transformer.") + n);
    ASSERT_EQ(file.shape, (std::vector<std::int64_t>{32, 32}));
    const auto it = std::find_if(w.params.begin(), w.params.end(), [&](const NamedWeights& p) {
      return p.name == std::string("transformer.") + n;
    });
    ASSERT_NE(it, w.params.end());
    std::vector<unsigned char> strata(it->values.size() * 4);
    std::memcpy(strata.data(), it->values.data(), strata.size());
    EXPECT_TRUE(strata == transposed(file)) << n << " must be transposed although it is square";
    EXPECT_TRUE(strata != file.bytes) << n;
  }
  EXPECT_EQ(hf_name_of("transformer.h.3.attn.c_proj.weight")->transposed, true);
  EXPECT_EQ(hf_name_of("transformer.h.3.attn.c_proj.bias")->transposed, false);
  EXPECT_FALSE(hf_name_of("lm_head.weight"));
}

TEST(HfGpt2, LinearLayoutUnderHfNamesIsRejected) {
  TempDir tmp;
  // A file written in nanoGPT's [out, in] layout but under HF's Conv1D names.
  const std::string dir = edited_copy(tmp, "linear", [](auto& t) {
    for (auto& [n, r] : t)
      if (n.find("c_attn.weight") != std::string::npos ||
          n.find("c_fc.weight") != std::string::npos ||
          n.find("c_proj.weight") != std::string::npos) {
        r.bytes = transposed(r);
        std::swap(r.shape[0], r.shape[1]);
      }
  });
  EXPECT_TRUE(throws_with<UserError>([&] { read_hf_gpt2(dir); },
                                     {"transformer.h.0.attn.c_attn.weight' is [96, 32], expected "
                                      "[32, 96]",
                                      "Conv1D"}));
}

TEST(HfGpt2, ShapeAndConfigMismatchesAreOneLineErrors) {
  TempDir tmp;
  auto one_line = [](const std::function<void()>& f, const std::string& frag) {
    return throws_with<UserError>(
        [&] {
          try {
            f();
          } catch (const UserError& e) {
            if (std::string(e.what()).find('\n') != std::string::npos)
              throw std::runtime_error(std::string("not one line: ") + e.what());
            throw;
          }
        },
        {frag});
  };
  const std::string ln = edited_copy(tmp, "ln", [](auto& t) {
    auto& r = t.at("transformer.h.1.ln_2.bias");
    r.shape = {31};
    r.bytes.resize(31 * 4);
  });
  EXPECT_TRUE(one_line([&] { read_hf_gpt2(ln); },
                       "'transformer.h.1.ln_2.bias' is [31], expected [32] for n_embd 32"));
  const std::string missing =
      edited_copy(tmp, "missing", [](auto& t) { t.erase("transformer.h.0.mlp.c_fc.bias"); });
  EXPECT_TRUE(
      one_line([&] { read_hf_gpt2(missing); }, "no tensor 'transformer.h.0.mlp.c_fc.bias'"));
  const std::string extra = edited_copy(tmp, "extra", [](auto& t) {
    t["transformer.h.0.attn.q_proj.weight"] = t.at("transformer.h.0.attn.c_proj.weight");
  });
  EXPECT_TRUE(one_line([&] { read_hf_gpt2(extra); },
                       "unexpected tensor 'transformer.h.0.attn.q_proj.weight'"));
  const std::string cfg = edited_copy(
      tmp, "cfg", [](auto&) {}, [](auto& c) { c["n_embd"] = 64; });
  EXPECT_TRUE(one_line([&] { read_hf_gpt2(cfg); }, "n_embd is 64 but the weights have"));
  const std::string act = edited_copy(
      tmp, "act", [](auto&) {}, [](auto& c) { c["activation_function"] = "gelu"; });
  EXPECT_TRUE(one_line([&] { read_hf_gpt2(act); }, "activation_function 'gelu'"));
  const std::string untied = edited_copy(tmp, "untied", [](auto& t) {
    t["lm_head.weight"] = t.at("transformer.wte.weight");
    t["lm_head.weight"].bytes[0] ^= 1;
  });
  EXPECT_TRUE(one_line([&] { read_hf_gpt2(untied); }, "lm_head.weight differs from wte.weight"));

  // Export: a checkpoint that is not a GPT-2, and one whose head count is unknown.
  testing::save_toy(tmp / "toy", 3, 1);
  EXPECT_TRUE(one_line([&] { export_hf_gpt2(tmp / "toy", tmp / "x"); }, "not a GPT-2 checkpoint"));
  EXPECT_FALSE(fs::exists(tmp / "x/model.safetensors"));
  const std::string nocfg = tmp / "nocfg";
  fs::create_directories(nocfg);
  fs::copy_file(kFixture + "/model.safetensors", nocfg + "/model.safetensors");
  EXPECT_TRUE(one_line([&] { import_consolidated(nocfg, tmp / "ck_nocfg"); }, "pass --n-head N"));
  ImportOptions o;
  o.n_head = 3;
  EXPECT_TRUE(one_line([&] { import_consolidated(nocfg, tmp / "ck_nocfg", o); },
                       "--n-head 3 does not divide n_embd 32"));
}

TEST(HfGpt2, ToleratesMaskBuffersTiedHeadAndUnprefixedNames) {
  TempDir tmp;
  // GPT2Model-style names (no "transformer."), the old mask buffers, and an equal lm_head.
  const std::string dir = edited_copy(tmp, "old", [](auto& t) {
    std::map<std::string, Raw> out;
    for (auto& [n, r] : t) out[n.substr(std::strlen("transformer."))] = r;
    out["lm_head.weight"] = out.at("wte.weight");
    Raw mask{"F32", {1, 1, 16, 16}, std::vector<unsigned char>(16 * 16 * 4, 0)};
    out["h.0.attn.bias"] = mask;
    out["h.1.attn.masked_bias"] = Raw{"F32", {}, std::vector<unsigned char>(4, 0)};
    t = out;
  });
  const HfGpt2Weights w = read_hf_gpt2(dir);
  EXPECT_EQ(w.skipped.size(), 3u);
  const HfGpt2Weights ref = read_hf_gpt2(kFixture);
  ASSERT_EQ(w.params.size(), ref.params.size());
  for (std::size_t i = 0; i < w.params.size(); ++i) {
    EXPECT_EQ(w.params[i].name, ref.params[i].name);
    EXPECT_EQ(w.params[i].values, ref.params[i].values) << w.params[i].name;
  }
}

}  // namespace
}  // namespace strata::checkpoint
