// A training job in this process: launcher/job's GptJob (the loop body train_gpt runs) over this
// process's world (one rank unless started by a launcher), driven step by step from Python so
// that the package shows progress and stops between steps. Long calls release the GIL.
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/config/config.hpp"
#include "framework/train/from_config.hpp"
#include "launcher/job/gpt_job.hpp"
#include "launcher/job/progress_file.hpp"
#include "launcher/job/startup_checks.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/plan/report.hpp"
#include "python/bindings/bindings.hpp"

namespace strata::python {

namespace {

class Job {
 public:
  Job(const std::string& doc_text, const std::string& source, const std::string& metrics,
      const std::string& log_dir, const std::string& init_from, bool save_initial, int threads) {
    py::gil_scoped_release release;
    config::Config cfg = config::parse_config(nlohmann::json::parse(doc_text), source);
    job::check_outputs(cfg, job::metrics_path(metrics, 0));
    train::resolve_device(cfg);  // "auto" made concrete (a config note); "cuda" without a GPU fails
    parallel::InitOptions init;
    init.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.strata.comm.timeout_s * 1000));
    // The process's world: one rank, or the launcher's ranks; kept for the process (a local
    // world is made again after finalize, MPI's cannot be).
    world_ = parallel::init_world(init);
    progress_ = job::ProgressFile::from_env(world_.rank());
    if (threads > 0) cpu::set_num_threads(threads);
    job::JobOptions o;
    o.metrics = metrics;
    o.log_dir = log_dir;
    o.start.init_from = init_from;
    o.start.save_initial = save_initial;
    o.every_step = true;
    job_ = std::make_unique<job::GptJob>(std::move(cfg), world_, o);
  }

  job::GptJob& get() {
    if (!job_) throw UserError("python", "this run is closed");
    return *job_;
  }

  py::dict step() {
    job::StepOutcome out;
    {
      py::gil_scoped_release release;
      out = get().run_step();
    }
    py::dict d;
    d["metrics"] = out.metrics_json;
    d["print"] = out.print;
    d["line"] = job::progress_line(out.report);
    std::vector<std::string> changes;
    for (const auto& c : out.micro_batch_changes)
      changes.push_back(fmt::format("micro-batch {} -> {}, accumulation {} (same global batch): {}",
                                    c.from, c.to, c.accumulation, c.why));
    d["micro_batch_changes"] = changes;
    return d;
  }

  bool end_step(bool stop) {
    py::gil_scoped_release release;
    job::GptJob& j = get();
    const bool stopping = j.agree_stop(stop) && !j.finished();
    j.save_if_due(stopping);
    if (progress_) progress_->step(j.step());
    return stopping;
  }

  std::string finish(bool completed) {
    py::gil_scoped_release release;
    const std::string s = get().finish();
    if (completed && progress_) progress_->done(get().step());
    return s;
  }

  std::vector<std::int32_t> sample(const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                   double temperature, int top_k, std::uint64_t seed) {
    py::gil_scoped_release release;
    nn::SampleOptions so;
    so.max_new_tokens = max_new_tokens;
    so.temperature = static_cast<float>(temperature);
    so.top_k = top_k;
    return get().sample(prompt, so, seed);
  }

  void close() {
    py::gil_scoped_release release;
    job_.reset();
  }

 private:
  parallel::Group world_;
  std::optional<job::ProgressFile> progress_;
  std::unique_ptr<job::GptJob> job_;
};

}  // namespace

void register_job(py::module_& m) {
  py::class_<Job>(m, "Job")
      .def(py::init<const std::string&, const std::string&, const std::string&, const std::string&,
                    const std::string&, bool, int>(),
           py::arg("document"), py::arg("source"), py::arg("metrics"), py::arg("log_dir"),
           py::arg("init_from"), py::arg("save_initial"), py::arg("threads"))
      .def("step", &Job::step, "Trains the next step: {'metrics', 'print', 'line', 'micro_batch_changes'}")
      .def("end_step", &Job::end_step, py::arg("stop"),
           "Agrees on stopping over the ranks, saves when due; returns whether the job stops")
      .def("finish", &Job::finish, py::arg("completed"),
           "The final save; returns the end-of-run memory report")
      .def("sample", &Job::sample, py::arg("prompt"), py::arg("max_new_tokens"),
           py::arg("temperature"), py::arg("top_k"), py::arg("seed"))
      .def("configured_sample", [](Job& j) {
        py::gil_scoped_release release;
        return j.get().configured_sample();
      })
      .def("close", &Job::close)
      .def_property_readonly("step_count", [](Job& j) { return j.get().step(); })
      .def_property_readonly("start_step", [](Job& j) { return j.get().start_step(); })
      .def_property_readonly("total_steps", [](Job& j) { return j.get().total_steps(); })
      .def_property_readonly("finished", [](Job& j) { return j.get().finished(); })
      .def_property_readonly("rank", [](Job& j) { return j.get().training().world().rank(); })
      .def_property_readonly("vocab_size", [](Job& j) { return j.get().model_config().vocab_size; })
      .def_property_readonly("resolved", [](Job& j) { return config::to_json(j.get().config()).dump(); })
      .def("last_checkpoint", [](Job& j) { return j.get().last_checkpoint(); })
      .def("memory_report", [](Job& j) { return j.get().memory_report(); })
      .def("tensorboard_file", [](Job& j) { return j.get().tensorboard_file(); })
      .def("plan", [](Job& j) { return to_python(parallel::plan::plan_json(j.get().plan())); });
}

}  // namespace strata::python
