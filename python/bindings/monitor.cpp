// TensorBoard event files read back with the project's own reader (launcher/job/tfevents.hpp).
#include "launcher/job/tfevents.hpp"
#include "python/bindings/bindings.hpp"

namespace strata::python {

void register_monitor(py::module_& m) {
  m.def(
      "read_tfevents",
      [](const std::string& path) {
        py::list out;
        for (const auto& e : job::read_tfevents(path)) {
          py::dict d;
          d["wall_time"] = e.wall_time;
          d["step"] = e.step;
          d["file_version"] = e.file_version;
          py::dict scalars;
          for (const auto& [tag, v] : e.scalars) scalars[py::str(tag)] = v;
          d["scalars"] = scalars;
          out.append(d);
        }
        return out;
      },
      py::arg("path"), "Every event of a TensorBoard event file: {'step', 'wall_time', 'scalars'}");
}

}  // namespace strata::python
