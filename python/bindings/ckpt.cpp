// Checkpoints as `strata ckpt` handles them: Hugging Face GPT-2 import and export, the HDF5
// export, verification.
#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/consolidated.hpp"
#include "framework/checkpoint/hf_gpt2.hpp"
#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/verify.hpp"
#include "framework/core/dtype.hpp"
#include "python/bindings/bindings.hpp"

namespace strata::python {

namespace ck = strata::checkpoint;

void register_ckpt(py::module_& m) {
  m.def(
      "import_weights",
      [](const std::string& source, const std::string& output, std::int64_t n_head,
         const std::vector<std::string>& exclude) {
        ck::ImportOptions o;
        o.n_head = n_head;
        o.exclude = exclude;
        ck::ImportResult r;
        {
          py::gil_scoped_release release;
          r = ck::import_consolidated(source, output, o);
        }
        py::dict d;
        d["format"] = r.format;
        d["step_dir"] = r.step_dir;
        d["params"] = r.params;
        d["elements"] = r.elements;
        d["skipped"] = r.skipped;
        return d;
      },
      py::arg("source"), py::arg("output"), py::arg("n_head"), py::arg("exclude"));
  m.def(
      "export_hf",
      [](const std::string& dir, const std::string& output, const std::string& dtype,
         std::int64_t n_head) {
        ck::HfExportOptions o;
        o.dtype = parse_dtype(dtype);
        o.n_head = n_head;
        ck::HfExportResult r;
        {
          py::gil_scoped_release release;
          r = ck::export_hf_gpt2(dir, output, o);
        }
        py::dict d;
        d["step_dir"] = r.step_dir;
        d["step"] = r.step;
        d["model_file"] = r.model_file;
        d["config_file"] = r.config_file;
        d["tensors"] = r.tensors;
        d["elements"] = r.elements;
        return d;
      },
      py::arg("dir"), py::arg("output"), py::arg("dtype"), py::arg("n_head"));
  m.def(
      "export_h5",
      [](const std::string& dir, const std::string& output) {
        ck::ExportResult r;
        {
          py::gil_scoped_release release;
          r = ck::export_consolidated(dir, output);
        }
        py::dict d;
        d["step_dir"] = r.step_dir;
        d["step"] = r.step;
        d["output"] = r.output;
        d["params"] = r.params;
        d["elements"] = r.elements;
        return d;
      },
      py::arg("dir"), py::arg("output"));
  m.def(
      "verify",
      [](const std::string& dir, bool quick) {
        ck::VerifyReport r;
        {
          py::gil_scoped_release release;
          r = ck::verify_checkpoint(ck::resolve_checkpoint_dir(dir),
                                    quick ? ck::VerifyLevel::structure : ck::VerifyLevel::full);
        }
        py::dict d;
        d["step_dir"] = r.step_dir;
        d["ok"] = r.ok();
        d["faults"] = r.faults;
        d["files_checked"] = r.files_checked;
        d["datasets_checked"] = r.datasets_checked;
        d["bytes_checksummed"] = r.bytes_checksummed;
        d["step"] = r.manifest ? py::object(py::int_(r.manifest->step)) : py::object(py::none());
        return d;
      },
      py::arg("dir"), py::arg("quick"));
  m.def("resolve_checkpoint_dir", &ck::resolve_checkpoint_dir, py::arg("dir"));
}

}  // namespace strata::python
