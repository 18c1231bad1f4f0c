// The memory planner as `strata plan` runs it (launcher/cmd_plan.cpp): each rank's peak per tier
// and category, whether it fits the caps, and optionally the recommended configuration.
#include <fmt/format.h>

#include "framework/config/config.hpp"
#include "framework/train/from_config.hpp"
#include "parallel/plan/auto_micro_batch.hpp"
#include "parallel/plan/recommend.hpp"
#include "parallel/plan/report.hpp"
#include "python/bindings/bindings.hpp"

namespace strata::python {

void register_plan(py::module_& m) {
  m.def(
      "plan",
      [](const std::string& doc_text, const std::string& source, int ranks, bool recommend) {
        nlohmann::json j;
        std::string text;
        {
          py::gil_scoped_release release;
          config::Config cfg = config::parse_config(nlohmann::json::parse(doc_text), source);
          train::resolve_device_for_plan(cfg);  // as `strata plan`: the job as it would run
          const auto model = parallel::plan::gpt_model();
          parallel::plan::resolve_auto_micro_batch(cfg, ranks, model);
          config::resolve_batch(cfg, config::data_parallel_size(cfg, ranks));
          const parallel::plan::MemoryPlan plan =
              parallel::plan::plan_memory(cfg, model, parallel::plan::PlanOptions{ranks, 2});
          j = parallel::plan::plan_json(plan);
          text = parallel::plan::format_plan_report(plan, cfg);
          if (recommend) {
            const auto rec = parallel::plan::recommend(cfg, ranks, model, parallel::plan::caps_of(cfg));
            j["recommendation"] = parallel::plan::recommendation_json(rec);
            text += "\n" + parallel::plan::format_recommendation(rec, cfg);
          }
        }
        py::dict out;
        out["plan"] = to_python(j);
        out["text"] = text;
        return out;
      },
      py::arg("document"), py::arg("source"), py::arg("ranks"), py::arg("recommend"),
      "Plans a config (JSON text): {'plan': strata plan --json's object, 'text': its table}");
}

}  // namespace strata::python
