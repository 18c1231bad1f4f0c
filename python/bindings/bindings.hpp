// The pieces of the _strata extension module, one file per concern (python/bindings): each
// registers its functions on the module. Errors cross as the Python exceptions of
// strata/errors.py (errors.cpp).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include <string>

namespace strata::python {

namespace py = pybind11;

void register_errors(py::module_& m);
void register_config(py::module_& m);
void register_plan(py::module_& m);
void register_job(py::module_& m);
void register_data(py::module_& m);
void register_ckpt(py::module_& m);
void register_device(py::module_& m);
void register_monitor(py::module_& m);

// A JSON value as the Python object json.loads would make (through its text).
py::object to_python(const nlohmann::json& j);

}  // namespace strata::python
