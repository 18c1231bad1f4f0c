// strata env: what this machine and build offer, like DeepSpeed's ds_report: compiled-in
// features, library versions at run time, CPU SIMD support, host memory and visible GPUs.
#include <fmt/format.h>
#include <hdf5.h>
#include <linux/io_uring.h>
#include <mpi.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <CLI/Version.hpp>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/memory/size.hpp"
#include "launcher/commands.hpp"

#if STRATA_BUILD_OPENBLAS
extern "C" char* openblas_get_config(void);  // OpenBLAS's own description of its build
#endif

namespace strata::launcher {

namespace {

using json = nlohmann::ordered_json;  // keeps the report in the order written

std::string first_line(std::string s) {
  const auto nl = s.find_first_of("\r\n");
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (std::isspace(static_cast<unsigned char>(s.back())) || s.back() == ',' ||
                        s.back() == '\0'))
    s.pop_back();
  return s;
}

std::string mpi_runtime() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "unknown";
  return "runtime " + first_line(std::string(buf, static_cast<std::size_t>(len)));
}

std::string hdf5_runtime() {
  unsigned maj = 0, min = 0, rel = 0;
  if (H5get_libversion(&maj, &min, &rel) < 0) return "unknown";
  return fmt::format("runtime {}.{}.{}", maj, min, rel);
}

std::string blas_runtime() {
#if STRATA_BUILD_OPENBLAS
  return "runtime " + first_line(openblas_get_config());
#else
  return {};
#endif
}

// Whether the kernel lets this process create an io_uring (containers often forbid it).
std::string io_uring_kernel() {
  io_uring_params p{};
  const long fd = syscall(__NR_io_uring_setup, 4, &p);
  if (fd >= 0) {
    close(static_cast<int>(fd));
    return "kernel: available";
  }
  return fmt::format("kernel: unavailable ({})", std::strerror(errno));
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

json simd_flags() {
  __builtin_cpu_init();
  return {{"sse4.2", __builtin_cpu_supports("sse4.2") != 0},
          {"avx", __builtin_cpu_supports("avx") != 0},
          {"avx2", __builtin_cpu_supports("avx2") != 0},
          {"fma", __builtin_cpu_supports("fma") != 0},
          {"f16c", __builtin_cpu_supports("f16c") != 0},
          {"avx512f", __builtin_cpu_supports("avx512f") != 0},
          {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
          {"avx512bf16", __builtin_cpu_supports("avx512bf16") != 0}};
}

// The visible GPUs: each one's name, memory (total and free now) and compute capability; why
// none is visible otherwise.
json gpus() {
  json list = json::array();
  const int n = cuda::device_count();
  for (int i = 0; i < n; ++i) {
    const cuda::DeviceProperties p = cuda::device_properties(i);
    const cuda::DeviceMemoryInfo m = cuda::device_memory_info(i);
    list.push_back({{"index", i},
                    {"name", p.name},
                    {"total_bytes", p.total_bytes},
                    {"free_bytes", m.free},
                    {"compute_capability", fmt::format("{}.{}", p.major, p.minor)}});
  }
  return {{"count", n}, {"devices", list}, {"summary", cuda::describe_devices()}};
}

json report() {
  json features = json::array();
  for (const auto& f : build_features()) {
    std::string runtime;
    if (f.name == "MPI")
      runtime = mpi_runtime();
    else if (f.name == "HDF5")
      runtime = hdf5_runtime();
    else if (f.name == "BLAS")
      runtime = blas_runtime();
    else if (f.name == "io_uring")
      runtime = io_uring_kernel();
    else if (f.name == "CUDA" && f.compiled)
      runtime = "runtime " + cuda::runtime_version();
    features.push_back(
        {{"name", f.name}, {"compiled", f.compiled}, {"build", f.detail}, {"runtime", runtime}});
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return {
      {"version", version_line()},
      {"build", build_description()},
      {"features", features},
      {"cpu",
       {{"model", cpu_model()},
        {"logical_cores", std::thread::hardware_concurrency()},
        {"simd", simd_flags()}}},
      {"host_memory_bytes", pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * page : 0},
      {"gpus", gpus()},
      {"libraries",
       {{"fmt",
         fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100)},
        {"nlohmann-json", fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR,
                                      NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH)},
        {"CLI11", CLI11_VERSION}}},
  };
}

void print_text(const json& r) {
  std::cout << r["version"].get<std::string>() << " environment report\n";
  std::cout << fmt::format("{:<13}{}\n", "build", r["build"].get<std::string>());
  std::cout << "features\n";
  for (const auto& f : r["features"]) {
    std::string detail = f["build"].get<std::string>();
    if (!f["runtime"].get<std::string>().empty()) detail += "; " + f["runtime"].get<std::string>();
    std::cout << fmt::format("  {} {:<10} {}\n", f["compiled"].get<bool>() ? "✓" : "✗",
                             f["name"].get<std::string>(), detail);
  }
  const json& cpu = r["cpu"];
  std::cout << fmt::format("{:<13}{}, {} logical cores\n", "cpu", cpu["model"].get<std::string>(),
                           cpu["logical_cores"].get<unsigned>());
  std::string simd;
  for (const auto& [name, on] : cpu["simd"].items())
    simd += fmt::format("{}{} {}", simd.empty() ? "" : "  ", on.get<bool>() ? "✓" : "✗", name);
  std::cout << fmt::format("{:<13}{}\n", "cpu simd", simd);
  std::cout << fmt::format("{:<13}{}\n", "host memory",
                           format_bytes(r["host_memory_bytes"].get<std::uint64_t>()));
  const json& gpus = r["gpus"];
  if (gpus["devices"].empty())
    std::cout << fmt::format("{:<13}{}\n", "gpus", gpus["summary"].get<std::string>());
  for (const json& g : gpus["devices"])
    std::cout << fmt::format("{:<13}cuda:{} {}, {} free of {}, compute capability {}\n",
                             g["index"].get<int>() == 0 ? "gpus" : "",
                             g["index"].get<int>(), g["name"].get<std::string>(),
                             format_bytes(g["free_bytes"].get<std::uint64_t>()),
                             format_bytes(g["total_bytes"].get<std::uint64_t>()),
                             g["compute_capability"].get<std::string>());
  std::string libs;
  for (const auto& [name, v] : r["libraries"].items())
    libs += fmt::format("{}{} {}", libs.empty() ? "" : ", ", name, v.get<std::string>());
  std::cout << fmt::format("{:<13}{}\n", "libraries", libs);
}

}  // namespace

void add_env_command(CLI::App& app) {
  auto as_json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "env",
      "Report compiled-in features, library versions, CPU SIMD support and visible GPUs "
      "(like DeepSpeed's ds_report)");
  cmd->add_flag("--json", *as_json, "Print the report as JSON");
  cmd->callback([as_json] {
    const json r = report();
    if (*as_json)
      std::cout << r.dump(2) << "\n";
    else
      print_text(r);
  });
}

}  // namespace strata::launcher
