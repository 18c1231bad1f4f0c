// strata ckpt: `inspect` (step, layout, parameter table, sizes), `verify` (completeness and
// checksums; non-zero exit on any fault), `export` (one consolidated fp32 HDF5 file under the
// PyTorch/nanoGPT names, or a Hugging Face GPT-2 directory) and `import` (either into a step-0
// checkpoint for fine-tuning).
// DIR is a checkpoint root (the step `latest` names) or one step directory.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/consolidated.hpp"
#include "framework/checkpoint/hf_gpt2.hpp"
#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/slice.hpp"
#include "framework/checkpoint/verify.hpp"
#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"
#include "launcher/commands.hpp"

namespace strata::launcher {

namespace {

namespace ck = strata::checkpoint;

std::string state_line(const ck::TrainState& s) {
  std::string out = fmt::format("optimizer {} ({} updates), scheduler step {}",
                                s.optimizer.empty() ? "none" : s.optimizer, s.optimizer_updates,
                                s.scheduler_steps);
  if (s.loss_scaler)
    out += fmt::format(", loss scale {} ({})", s.loss_scaler->cur_scale,
                       s.loss_scaler->dynamic ? "dynamic" : "static");
  if (s.sampler)
    out += fmt::format(", data position {} (epoch {})", s.sampler->position, s.sampler->epoch);
  return out;
}

void run_inspect(const std::string& dir, bool show_slices) {
  const std::string step_dir = ck::resolve_checkpoint_dir(dir);
  const ck::Manifest m = ck::read_manifest(step_dir);
  const ck::WorldLayout& l = m.layout;
  fmt::print("checkpoint  {}\n", step_dir);
  fmt::print("step        {}\n", m.step);
  fmt::print("written     {} by strata {} (format {})\n", m.created, m.strata_version,
             m.format_version);
  fmt::print("layout      world {} = dp {} x tp {} x pp {}, ZeRO stage {}\n", l.world, l.dp, l.tp,
             l.pp, m.zero_stage);
  fmt::print("state       {}\n", state_line(m.state));
  fmt::print("files       {} rank files, {}\n", m.files.size(), format_bytes(m.total_bytes()));

  std::size_t wname = 9, wshape = 5;
  for (const auto& p : m.params) {
    wname = std::max(wname, p.name.size());
    wshape = std::max(wshape, p.shape.str().size());
  }
  std::map<std::string, std::uint64_t> bytes_by_kind;
  std::int64_t elements = 0;
  std::size_t state_entries = 0;
  fmt::print("\n{:<{}}  {:<{}}  {:<5}  {:>12}  {}\n", "parameter", wname, "shape", wshape, "dtype",
             "elements", "kinds (slices)");
  for (const auto& p : m.params) {
    std::map<std::string, int> count;
    for (const auto& s : p.slices) {
      ++count[s.kind];
      bytes_by_kind[s.kind] += static_cast<std::uint64_t>(s.end - s.begin) * dtype_size(s.dtype);
    }
    std::string kinds;
    for (const auto& [k, n] : count)
      kinds += fmt::format("{}{} ({})", kinds.empty() ? "" : ", ", k, n);
    fmt::print("{:<{}}  {:<{}}  {:<5}  {:>12}  {}\n", p.name, wname, p.shape.str(), wshape,
               dtype_name(p.dtype), p.numel(), kinds);
    if (checkpoint::is_state_entry(p.name))
      ++state_entries;  // optimizer state of its own shape, not a parameter
    else
      elements += p.numel();
    if (show_slices)
      for (const auto& s : p.slices)
        fmt::print("    {:<10} {} {} in {}:{}  {}\n", s.kind, s.layout().str(),
                   dtype_name(s.dtype), s.file, s.dataset, fmt::format("crc32:{:08x}", s.checksum));
  }
  fmt::print("\ntotal       {} parameters, {} elements{}\n", m.params.size() - state_entries, elements,
             state_entries ? fmt::format(" (and {} optimizer-state entries)", state_entries) : "");
  for (const auto& [k, b] : bytes_by_kind) fmt::print("  {:<18}{}\n", k, format_bytes(b));
}

void run_verify(const std::string& dir, bool all, bool quick) {
  std::vector<std::string> dirs;
  if (all) {
    for (const auto& c : ck::list_step_dirs(dir)) dirs.push_back(c.dir);
    if (dirs.empty()) user_fail("checkpoint", "'{}' holds no step directories", dir);
  } else {
    dirs.push_back(ck::resolve_checkpoint_dir(dir));
  }
  std::size_t faults = 0, bad = 0;
  for (const auto& d : dirs) {
    const ck::VerifyReport rep =
        ck::verify_checkpoint(d, quick ? ck::VerifyLevel::structure : ck::VerifyLevel::full);
    if (rep.ok()) {
      fmt::print("ok     {}  ({} files, {} datasets{})\n", d, rep.files_checked,
                 rep.datasets_checked,
                 quick ? ", checksums not read"
                       : fmt::format(", {} checksummed", format_bytes(rep.bytes_checksummed)));
    } else {
      ++bad;
      faults += rep.faults.size();
      fmt::print("FAULT  {}  ({} fault{})\n", d, rep.faults.size(),
                 rep.faults.size() == 1 ? "" : "s");
      for (const auto& f : rep.faults) fmt::print("  {}\n", f);
    }
  }
  std::fflush(stdout);
  if (faults)
    user_fail("checkpoint", "{} of {} checkpoint(s) failed verification ({} fault{})", bad,
              dirs.size(), faults, faults == 1 ? "" : "s");
}

}  // namespace

void add_ckpt_command(CLI::App& app) {
  auto* ckpt = app.add_subcommand("ckpt", "Inspect, verify, export and import sharded checkpoints");
  ckpt->require_subcommand(1);

  {
    auto dir = std::make_shared<std::string>();
    auto slices = std::make_shared<bool>(false);
    auto* cmd = ckpt->add_subcommand(
        "inspect", "Print a checkpoint's step, layout, state and parameter table");
    cmd->add_option("dir", *dir, "Checkpoint root (uses 'latest') or step directory")->required();
    cmd->add_flag("--slices", *slices, "Also list every slice: kind, range, file and dataset");
    cmd->callback([dir, slices] { run_inspect(*dir, *slices); });
  }
  {
    struct Args {
      std::string dir;
      bool all = false;
      bool quick = false;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = ckpt->add_subcommand(
        "verify",
        "Check completeness, sizes, self-descriptions and checksums; exit status 1 on any fault");
    cmd->add_option("dir", a->dir, "Checkpoint root (uses 'latest') or step directory")->required();
    cmd->add_flag("--all", a->all, "Verify every step directory under the root DIR");
    cmd->add_flag("--quick", a->quick, "Skip reading data for checksums (structure only)");
    cmd->callback([a] { run_verify(a->dir, a->all, a->quick); });
  }
  {
    struct Args {
      std::string dir, output, format, dtype = "f32";
      std::int64_t n_head = 0;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = ckpt->add_subcommand(
        "export",
        "Write the weights as one fp32 HDF5 file under their PyTorch/nanoGPT names "
        "(h5py-readable), or as a Hugging Face GPT-2 (model.safetensors + config.json)");
    cmd->add_option("dir", a->dir, "Checkpoint root (uses 'latest') or step directory")->required();
    cmd->add_option("--output,-o", a->output,
                    "Output: a .h5/.hdf5 file, or a directory for the Hugging Face format")
        ->required();
    cmd->add_option("--format", a->format,
                    "h5 or hf (default: h5 for a .h5/.hdf5 output, hf otherwise)")
        ->check(CLI::IsMember({"h5", "hf"}));
    cmd->add_option("--dtype", a->dtype, "hf: tensor dtype in the file")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str();
    cmd->add_option("--n-head", a->n_head,
                    "hf: attention heads, when the checkpoint's config does not say")
        ->check(CLI::PositiveNumber);
    cmd->callback([a, cmd] {
      const bool h5_name = a->output.ends_with(".h5") || a->output.ends_with(".hdf5");
      const std::string format = a->format.empty() ? (h5_name ? "h5" : "hf") : a->format;
      if (format == "hf") {
        if (h5_name)
          user_fail("checkpoint", "--format hf writes a directory (model.safetensors + "
                    "config.json), not '{}'", a->output);
        ck::HfExportOptions o;
        o.dtype = parse_dtype(a->dtype);
        o.n_head = a->n_head;
        const ck::HfExportResult r = ck::export_hf_gpt2(a->dir, a->output, o);
        fmt::print("exported step {} from {}: GPT-2 {} layers, {} heads, n_embd {}, vocab {}, "
                   "{} positions; {} tensors, {} elements ({}) -> {}, {}\n",
                   r.step, r.step_dir, r.shape.n_layer, r.shape.n_head, r.shape.n_embd,
                   r.shape.vocab_size, r.shape.n_positions, r.tensors, r.elements, a->dtype,
                   r.model_file, r.config_file);
        return;
      }
      for (const char* opt : {"--dtype", "--n-head"})
        if (cmd->count(opt))
          user_fail("checkpoint", "{} applies to --format hf; the HDF5 export is fp32", opt);
      const ck::ExportResult r = ck::export_consolidated(a->dir, a->output);
      fmt::print("exported step {} from {}: {} parameters, {} elements -> {}\n", r.step, r.step_dir,
                 r.params, r.elements, r.output);
    });
  }
  {
    struct Args {
      std::string file, output;
      std::vector<std::string> exclude;
      std::int64_t n_head = 0;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = ckpt->add_subcommand(
        "import",
        "Turn an HDF5 file of float weights (e.g. from 'ckpt export' or h5py), or a Hugging Face "
        "GPT-2 (a .safetensors file or a directory with model.safetensors), into a step-0 "
        "checkpoint");
    cmd->add_option("file", a->file,
                    "HDF5 file, .safetensors file, or directory holding model.safetensors")
        ->required();
    cmd->add_option("--output,-o", a->output, "Checkpoint root to create")->required();
    cmd->add_option("--exclude", a->exclude,
                    "HDF5: dataset names to leave out (e.g. lm_head.weight when tied)");
    cmd->add_option("--n-head", a->n_head,
                    "Hugging Face: attention heads, when no config.json is beside the weights")
        ->check(CLI::PositiveNumber);
    cmd->callback([a] {
      if (a->n_head > 0 && !ck::is_hf_gpt2_path(a->file))
        user_fail("checkpoint", "--n-head applies to Hugging Face input (a .safetensors file or a "
                  "directory with model.safetensors), not '{}'", a->file);
      ck::ImportOptions opt;
      opt.exclude = a->exclude;
      opt.n_head = a->n_head;
      const ck::ImportResult r = ck::import_consolidated(a->file, a->output, opt);
      for (const auto& s : r.skipped) fmt::print("skipped {}\n", s);
      fmt::print("imported {} parameters, {} elements -> {}\n", r.params, r.elements, r.step_dir);
    });
  }
}

}  // namespace strata::launcher
