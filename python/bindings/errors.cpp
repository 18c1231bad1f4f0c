// C++ errors as the Python exceptions of strata/errors.py: config::ConfigError → ConfigError with
// every problem's line, OutOfMemory → OutOfMemory with the ledger's breakdown and the advice as
// data, any other strata::Error → StrataError (its tag, whether it is bad input).
#include <nlohmann/json.hpp>

#include "framework/config/problems.hpp"
#include "framework/memory/out_of_memory.hpp"
#include "python/bindings/bindings.hpp"

namespace strata::python {

namespace {

nlohmann::json oom_info(const OutOfMemory& e) {
  const OomContext& c = e.context();
  const int t = static_cast<int>(c.tier);
  nlohmann::json in_use = nlohmann::json::object();
  for (std::size_t k = 0; k < kNumCategories; ++k)
    if (c.snapshot.current[t][k] > 0)
      in_use[std::string(category_name(static_cast<Category>(k)))] = c.snapshot.current[t][k];
  nlohmann::json advice = nlohmann::json::array();
  for (std::size_t i = 0; i < e.advice().size(); ++i)
    advice.push_back({{"text", e.advice()[i]},
                      {"sets", i < e.advice_sets().size() ? e.advice_sets()[i]
                                                          : std::vector<std::string>{}}});
  return {{"tier", tier_name(c.tier)},
          {"category", category_name(c.category)},
          {"requested", c.requested},
          {"cap", c.cap},
          {"refused_by", c.refused_by},
          {"step_needs", e.step_needs() ? nlohmann::json(*e.step_needs()) : nlohmann::json()},
          {"in_use", in_use},
          {"advice", advice}};
}

void raise(const char* type, const py::object& value) {
  py::object cls = py::module_::import("strata.errors").attr(type);
  PyErr_SetObject(cls.ptr(), value.ptr());
}

}  // namespace

void register_errors(py::module_&) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const config::ConfigError& e) {
      py::list lines;
      for (const auto& l : e.lines()) lines.append(l);
      raise("ConfigError", py::module_::import("strata.errors").attr("ConfigError")(e.what(), lines));
    } catch (const OutOfMemory& e) {
      raise("OutOfMemory",
            py::module_::import("strata.errors").attr("OutOfMemory")(e.what(), to_python(oom_info(e))));
    } catch (const UserError& e) {
      raise("StrataError",
            py::module_::import("strata.errors").attr("StrataError")(e.what(), e.tag(), true));
    } catch (const Error& e) {
      raise("StrataError",
            py::module_::import("strata.errors").attr("StrataError")(e.what(), e.tag(), false));
    }
  });
}

}  // namespace strata::python
