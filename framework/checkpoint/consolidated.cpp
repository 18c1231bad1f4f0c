#include "framework/checkpoint/consolidated.hpp"

#include <algorithm>
#include <filesystem>

#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/hf_gpt2.hpp"
#include "framework/checkpoint/h5_io.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/save.hpp"
#include "framework/checkpoint/space.hpp"
#include "framework/core/convert.hpp"
#include "framework/core/json_limits.hpp"
#include "framework/core/output_path.hpp"

namespace strata::checkpoint {

namespace fs = std::filesystem;

ExportResult export_consolidated(const std::string& dir, const std::string& output) {
  ExportResult r;
  r.step_dir = resolve_checkpoint_dir(dir);
  r.output = output;
  CheckpointReader reader(r.step_dir);
  const Manifest& m = reader.manifest();
  r.step = m.step;
  check_output_file(output, "checkpoint", "output file");
  const std::string tmp = output + std::string(kTmpSuffix);
  // The data, HDF5's metadata and the reserved rest of its first metadata block (h5_io.hpp).
  std::uint64_t need = h5::kMetadataBlockBytes + 64 * 1024;
  for (const ParamEntry& p : m.params) need += static_cast<std::uint64_t>(p.numel()) * 4;
  const std::string out_name = fmt::format("'{}'", fs::path(output).filename().string());
  require_space(parent_dir(output), out_name, need);
  try {
    h5::Id file = h5::create_file(tmp);
    const hid_t f = file.get();
    h5::write_attr(f, "format", kExportFormat);
    h5::write_attr(f, "format_version", kExportFormatVersion);
    h5::write_attr(f, "step", m.step);
    h5::write_attr(f, "strata_version", m.strata_version);
    h5::write_attr(f, "source", fs::absolute(r.step_dir).lexically_normal().string());
    h5::write_attr(f, "config", m.config.dump());
    if (m.config.is_object() && m.config.contains("strata") && m.config["strata"].is_object() &&
        m.config["strata"].contains("model"))
      h5::write_attr(f, "model", m.config["strata"]["model"].dump());
    std::vector<float> buf;
    for (const ParamEntry& p : m.params) {
      if (is_state_entry(p.name)) continue;  // optimizer state: not exported
      buf.resize(static_cast<std::size_t>(p.numel()));
      reader.read_range(kParam, p.name, 0, p.numel(), buf.data(), DType::f32);
      h5::Id ds = h5::write_dataset(f, "/" + p.name, DType::f32, p.shape.dims(), buf.data());
      h5::write_attr(ds.get(), "source_dtype", std::string(dtype_name(p.dtype)));
      ds.close("dataset");
      ++r.params;
      r.elements += p.numel();
    }
    file.close(tmp.c_str());
    fsync_file(tmp);
    rename_durable(tmp, output);
  } catch (const NoSpaceError&) {
    std::error_code ec;
    fs::remove(tmp, ec);
    no_space(parent_dir(output), out_name, need, false);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  return r;
}

namespace {

struct Found {
  std::string path;  // inside the file
  std::string name;  // dotted
};

herr_t visit(hid_t, const char* name, const H5O_info_t* info, void* data) {
  if (info->type == H5O_TYPE_DATASET) {
    std::string dotted = name;
    std::replace(dotted.begin(), dotted.end(), '/', '.');
    static_cast<std::vector<Found>*>(data)->push_back({std::string("/") + name, dotted});
  }
  return 0;
}

std::vector<Found> list_datasets(hid_t file) {
  std::vector<Found> out;
  if (H5Ovisit2(file, H5_INDEX_CRT_ORDER, H5_ITER_INC, visit, &out, H5O_INFO_BASIC) >= 0)
    return out;
  h5::last_error();  // creation order not tracked in this file: name order
  out.clear();
  STRATA_CHECK_H5(H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, visit, &out, H5O_INFO_BASIC));
  return out;
}

// Writes `tensors` as a complete one-rank step-0 checkpoint under `root`.
void write_step0(const std::string& root, const std::vector<NamedWeights>& tensors,
                 const json& config, const json& extra, ImportResult& r) {
  std::vector<SliceRef> slices;
  for (const auto& t : tensors) {
    slices.push_back(SliceRef{std::string(kParam), t.name, t.shape, DType::f32, 0, t.shape.numel(),
                              t.values.data()});
    ++r.params;
    r.elements += t.shape.numel();
  }
  SaveSpec spec;
  spec.root = root;
  spec.rank = 0;
  spec.header.step = 0;
  spec.header.config = config;
  spec.header.state.extra = extra;
  save_checkpoint(spec, slices, RankState{}, single_process_ok);
}

ImportResult import_hf(const std::string& path, const std::string& root,
                       const ImportOptions& options, ImportResult r) {
  if (!options.exclude.empty())
    user_fail("checkpoint", "--exclude applies to HDF5 files; a Hugging Face GPT-2 is mapped by "
              "name (its mask buffers and tied lm_head are left out by themselves)");
  HfGpt2Weights w = read_hf_gpt2(path);
  if (options.n_head > 0 && w.shape.n_head > 0 && options.n_head != w.shape.n_head)
    user_fail("checkpoint", "--n-head {} but {} says n_head {}", options.n_head,
              (fs::path(w.file).parent_path() / kHfConfigFile).string(), w.shape.n_head);
  if (options.n_head > 0) w.shape.n_head = options.n_head;
  if (w.shape.n_head <= 0)
    user_fail("checkpoint", "{}: no {} beside it says how many attention heads the model has: "
              "pass --n-head N", w.file, kHfConfigFile);
  if (w.shape.n_embd % w.shape.n_head != 0)
    user_fail("checkpoint", "--n-head {} does not divide n_embd {}", w.shape.n_head,
              w.shape.n_embd);
  r.format = "hf";
  r.skipped = w.skipped;
  const json model = {{"type", "gpt"},
                      {"n_layer", w.shape.n_layer},
                      {"n_head", w.shape.n_head},
                      {"n_embd", w.shape.n_embd},
                      {"block_size", w.shape.n_positions},
                      {"vocab_size", w.shape.vocab_size}};
  json extra = {{"imported_from", fs::absolute(w.file).lexically_normal().string()}};
  if (w.hf_config.is_object()) extra["hf_config"] = w.hf_config;
  write_step0(root, w.params, json{{"strata", {{"model", model}}}}, extra, r);
  return r;
}

}  // namespace

ImportResult import_consolidated(const std::string& file_path, const std::string& root,
                                 const ImportOptions& options) {
  ImportResult r;
  r.step_dir = join_path(root, step_dir_name(0));
  check_output_dir(root, "checkpoint", "output directory");
  std::error_code ec;
  if (fs::exists(join_path(r.step_dir, kManifestName), ec))
    user_fail("checkpoint",
              "'{}' already holds a step-0 checkpoint; import into an empty directory", root);
  if (!fs::exists(file_path, ec)) user_fail("checkpoint", "'{}' does not exist", file_path);
  if (is_hf_gpt2_path(file_path)) return import_hf(file_path, root, options, std::move(r));
  if (!fs::is_regular_file(file_path, ec)) user_fail("checkpoint", "'{}' is not a file", file_path);
  r.format = "h5";

  h5::Id file;
  try {
    file = h5::open_file(file_path);
  } catch (const Error& e) {
    throw UserError("checkpoint",
                    fmt::format("{}: {}", file_path, std::string(e.what()).substr(13)));
  }
  const hid_t f = file.get();
  json config = json::object();
  if (h5::has_attr(f, "config")) {
    try {
      const std::string text = h5::read_attr_string(f, "config");
      check_json_limits(text, "attribute 'config'", "checkpoint");
      config = json::parse(text);
    } catch (const std::exception& e) {
      user_fail("checkpoint", "{}: attribute 'config' is not JSON text: {}", file_path, e.what());
    }
  }

  std::vector<NamedWeights> tensors;
  for (const Found& d : list_datasets(f)) {
    if (std::find(options.exclude.begin(), options.exclude.end(), d.name) !=
        options.exclude.end()) {
      r.skipped.push_back(d.name + " (excluded)");
      continue;
    }
    h5::Id ds = h5::open_dataset(f, d.path);
    h5::Id type(STRATA_CHECK_H5(H5Dget_type(ds.get())), H5Tclose);
    const H5T_class_t cls = H5Tget_class(type.get());
    DType half = DType::f32;
    bool ok = cls == H5T_FLOAT;
    if (!ok && cls == H5T_INTEGER &&
        h5::has_attr(ds.get(), "dtype")) {  // Strata's 16-bit float bits
      const std::string dt = h5::read_attr_string(ds.get(), "dtype");
      if ((dt == "bf16" || dt == "f16") && h5::type_matches(type.get(), DType::bf16)) {
        half = dt == "bf16" ? DType::bf16 : DType::f16;
        ok = true;
      }
    }
    if (!ok) {
      r.skipped.push_back(fmt::format("{} ({})", d.name, h5::describe_type(type.get())));
      continue;
    }
    if (!valid_param_name(d.name))
      user_fail("checkpoint", "{}: dataset name '{}' is not usable", file_path, d.name);
    NamedWeights t{d.name, Shape(h5::dataset_dims(ds.get())), {}};
    t.values.resize(static_cast<std::size_t>(t.shape.numel()));
    if (t.values.empty()) {
      r.skipped.push_back(d.name + " (empty)");
      continue;
    }
    if (half == DType::f32) {
      h5::read_dataset_as_f32(ds.get(), t.values.data());
    } else {
      std::vector<std::uint16_t> bits(t.values.size());
      h5::read_dataset(ds.get(), half, bits.data());
      convert(bits.data(), half, t.values.data(), DType::f32, bits.size());
    }
    tensors.push_back(std::move(t));
  }
  if (tensors.empty())
    user_fail("checkpoint", "{}: no floating-point datasets to import", file_path);

  write_step0(root, tensors, config, json::object(), r);
  return r;
}

}  // namespace strata::checkpoint
