// The _strata extension module: the C++ layers as the Python package (python/strata) calls them.
#include "python/bindings/bindings.hpp"

namespace strata::python {

py::object to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

}  // namespace strata::python

PYBIND11_MODULE(_strata, m) {
  using namespace strata::python;
  m.doc() = "Strata's C++ library as the strata package calls it (use the strata package)";
  register_errors(m);
  register_config(m);
  register_plan(m);
  register_job(m);
  register_data(m);
  register_ckpt(m);
  register_device(m);
  register_monitor(m);
}
