// strata ckpt: `inspect` (step, layout, parameter table, sizes), `verify` (completeness and
// checksums; non-zero exit on any fault), `export` (one consolidated fp32 HDF5 file under the
// PyTorch/nanoGPT names) and `import` (such a file into a step-0 checkpoint for fine-tuning).
// DIR is a checkpoint root (the step `latest` names) or one step directory.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/consolidated.hpp"
#include "framework/checkpoint/manifest.hpp"
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
    elements += p.numel();
    if (show_slices)
      for (const auto& s : p.slices)
        fmt::print("    {:<10} [{}, {}) {} in {}:{}  {}\n", s.kind, s.begin, s.end,
                   dtype_name(s.dtype), s.file, s.dataset, fmt::format("crc32:{:08x}", s.checksum));
  }
  fmt::print("\ntotal       {} parameters, {} elements\n", m.params.size(), elements);
  for (const auto& [k, b] : bytes_by_kind) fmt::print("  {:<12}{}\n", k, format_bytes(b));
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
      std::string dir, output;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = ckpt->add_subcommand("export",
                                     "Write the weights as one fp32 HDF5 file under their "
                                     "PyTorch/nanoGPT names (h5py-readable)");
    cmd->add_option("dir", a->dir, "Checkpoint root (uses 'latest') or step directory")->required();
    cmd->add_option("--output,-o", a->output, "Output .h5 file")->required();
    cmd->callback([a] {
      const ck::ExportResult r = ck::export_consolidated(a->dir, a->output);
      fmt::print("exported step {} from {}: {} parameters, {} elements -> {}\n", r.step, r.step_dir,
                 r.params, r.elements, r.output);
    });
  }
  {
    struct Args {
      std::string file, output;
      std::vector<std::string> exclude;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = ckpt->add_subcommand("import",
                                     "Turn an HDF5 file of float weights (e.g. from 'ckpt export' "
                                     "or h5py) into a step-0 checkpoint");
    cmd->add_option("file", a->file, "HDF5 file of weights")->required();
    cmd->add_option("--output,-o", a->output, "Checkpoint root to create")->required();
    cmd->add_option("--exclude", a->exclude,
                    "Dataset names to leave out (e.g. lm_head.weight when tied)");
    cmd->callback([a] {
      ck::ImportOptions opt;
      opt.exclude = a->exclude;
      const ck::ImportResult r = ck::import_consolidated(a->file, a->output, opt);
      for (const auto& s : r.skipped) fmt::print("skipped {}\n", s);
      fmt::print("imported {} parameters, {} elements -> {}\n", r.params, r.elements, r.step_dir);
    });
  }
}

}  // namespace strata::launcher
