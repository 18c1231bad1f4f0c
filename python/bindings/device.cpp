// What this process computes on: the device "auto" picks (train::compute_device), the GPUs, the
// CPU threads; a flush of C's stdout (the package prints between C++ calls); byte sizes as
// Strata writes them.
#include <cstdio>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cuda_runtime.hpp"
#include "framework/config/config.hpp"
#include "framework/memory/size.hpp"
#include "framework/train/from_config.hpp"
#include "python/bindings/bindings.hpp"

namespace strata::python {

void register_device(py::module_& m) {
  m.def(
      "auto_device",
      [] {
        const Device d = train::compute_device(config::Config{});
        return d.is_cuda() ? "cuda:" + std::to_string(d.index) : std::string("cpu");
      },
      "The device strata.device \"auto\" picks here: \"cuda:N\" or \"cpu\"");
  m.def("cuda_compiled", &cuda::compiled);
  m.def("gpu_count", &cuda::device_count);
  m.def("describe_gpus", &cuda::describe_devices);
  m.def("num_threads", &cpu::num_threads);
  m.def("set_num_threads", &cpu::set_num_threads, py::arg("threads"));
  m.def("flush", [] { std::fflush(stdout); });
  m.def("format_bytes", [](std::uint64_t b) { return format_bytes(b); }, py::arg("bytes"));
}

}  // namespace strata::python
