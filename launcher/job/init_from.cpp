#include "launcher/job/init_from.hpp"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>

#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/consolidated.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/hf_gpt2.hpp"
#include "framework/checkpoint/manifest.hpp"
#include "framework/core/error.hpp"
#include "framework/core/json_limits.hpp"
#include "parallel/engine/rank_agreement.hpp"

namespace strata::job {

namespace {

namespace fs = std::filesystem;
namespace ck = strata::checkpoint;

std::string absolute(const std::string& p) {
  return fs::absolute(p).lexically_normal().string();
}

// A Hugging Face GPT-2 or an HDF5 file: converted into a step-0 checkpoint before loading.
bool needs_conversion(const std::string& source) {
  std::error_code ec;
  return ck::is_hf_gpt2_path(source) || fs::is_regular_file(source, ec);
}

// Rank 0: the source as a step directory (converted under `scratch` when it is not a checkpoint),
// checked against the configured number of heads (shapes cannot tell it).
std::string weights_dir(const std::string& source, const std::string& scratch,
                        const config::Config& cfg) {
  std::string step_dir;
  if (needs_conversion(source)) {
    std::error_code ec;
    fs::remove_all(scratch, ec);  // left by an earlier attempt
    step_dir = ck::import_consolidated(source, scratch).step_dir;
  } else {
    step_dir = ck::resolve_checkpoint_dir(source);
  }
  const ck::json c = ck::read_manifest(step_dir).config;
  if (c.is_object() && c.contains("strata") && c["strata"].contains("model") &&
      c["strata"]["model"].contains("n_head")) {
    const auto heads = c["strata"]["model"]["n_head"].get<std::int64_t>();
    if (heads != cfg.strata.model.n_head)
      user_fail("train_gpt",
                "--init-from {}: the weights are for {} attention heads but strata.model.n_head "
                "is {}: set --set strata.model.n_head={}",
                source, heads, cfg.strata.model.n_head, heads);
  }
  return step_dir;
}

// The Hugging Face config a source carries (config.json beside a safetensors model, or what an
// imported checkpoint kept), so that the run's checkpoints export with it; null when none.
ck::json hf_config_of(const std::string& source) {
  std::error_code ec;
  try {
    if (ck::is_hf_gpt2_path(source)) {
      const fs::path dir =
          fs::is_directory(source, ec) ? fs::path(source) : fs::path(source).parent_path();
      const fs::path cfg = dir / ck::kHfConfigFile;
      if (!fs::exists(cfg, ec)) return ck::json();
      const std::string text = ck::read_text_file(cfg.string());
      check_json_limits(text, cfg.string(), "train_gpt");  // depth, number sizes
      return ck::json::parse(text);
    }
    if (fs::is_directory(source, ec)) {
      const ck::json& extra = ck::read_manifest(ck::resolve_checkpoint_dir(source)).state.extra;
      if (extra.contains("hf_config")) return extra["hf_config"];
    }
  } catch (const std::exception&) {
    // Unreadable here: the load reports the problem with the source itself.
  }
  return ck::json();
}

}  // namespace

void check_start_options(const config::Config& cfg, const StartOptions& o) {
  const std::string& resume = cfg.strata.checkpoint.resume;
  if (!o.init_from.empty()) {
    if (resume != "auto" && resume != "none")
      user_fail("train_gpt",
                "--init-from {} and --resume {} both say where the weights come from: use "
                "--init-from to start a new run (fresh optimizer, step 0) or --resume to continue "
                "one, not both",
                o.init_from, resume);
    std::error_code ec;
    if (!fs::exists(o.init_from, ec))
      user_fail("train_gpt", "--init-from {}: no such file or directory", o.init_from);
  }
  if (o.save_initial && cfg.strata.checkpoint.dir.empty())
    user_fail("train_gpt",
              "--save-initial saves through the checkpoint path: set "
              "--checkpoint-dir DIR (or strata.checkpoint.dir)");
}

std::int64_t start_training(const config::Config& cfg, const parallel::Group& world,
                            parallel::CheckpointPolicy& checkpoints, const StartOptions& o) {
  check_start_options(cfg, o);
  const bool lead = world.rank() == 0;
  std::string source;
  if (!o.init_from.empty()) {
    source = absolute(o.init_from);
    ck::json extra = {{"init_from", source}};
    if (ck::json hf = hf_config_of(source); hf.is_object()) extra["hf_config"] = std::move(hf);
    checkpoints.set_extra(std::move(extra));
  }
  std::int64_t start = checkpoints.resume();
  const bool resumed = checkpoints.last_saved().has_value();
  if (resumed && !source.empty()) {
    const ck::json& extra = checkpoints.resumed_extra();
    const std::string recorded = extra.contains("init_from") && extra["init_from"].is_string()
                                     ? extra["init_from"].get<std::string>()
                                     : "";
    if (recorded != source)
      user_fail(
          "train_gpt",
          "--init-from {}: {} already holds a run {}; resume it without --init-from, or "
          "start the new run in another --checkpoint-dir",
          source, cfg.strata.checkpoint.dir,
          recorded.empty() ? "that was not started with --init-from" : "started from " + recorded);
    if (lead)
      std::printf("init-from: not used, this run resumes its own checkpoint (it started from %s)\n",
                  source.c_str());
  } else if (!source.empty()) {
    std::string scratch =
        o.scratch_dir.empty() ? std::string() : (fs::path(o.scratch_dir) / "init_from").string();
    const bool convert = needs_conversion(source);
    const std::string step_dir = parallel::on_rank0(world, [&] {
      if (convert && scratch.empty()) {
        std::string pattern = (fs::temp_directory_path() / "strata-init-XXXXXX").string();
        if (!::mkdtemp(pattern.data()))
          user_fail("train_gpt", "cannot create a temporary directory under {}",
                    fs::temp_directory_path().string());
        scratch = (fs::path(pattern) / "ck").string();
      }
      return weights_dir(source, scratch, cfg);
    });
    std::exception_ptr err;
    try {
      checkpoints.load_weights(step_dir);
    } catch (...) {
      err = std::current_exception();
    }
    if (lead && convert) {
      std::error_code ec;
      const fs::path root = fs::path(step_dir).parent_path();
      fs::remove_all(o.scratch_dir.empty() ? root.parent_path() : root, ec);  // the converted copy
    }
    if (err) std::rethrow_exception(err);
    start = 0;
    if (lead)
      std::printf("init-from: weights of %s (fresh optimizer state, step 0)\n", source.c_str());
  }
  if (o.save_initial && !resumed) checkpoints.save(0);
  if (o.save_initial && resumed && lead)
    std::printf("save-initial: nothing saved, the run resumes at step %lld (step 0 is saved only "
                "when a run starts)\n",
                static_cast<long long>(start));
  if (lead) std::fflush(stdout);
  return start;
}

}  // namespace strata::job
