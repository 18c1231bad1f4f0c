// strata version: the version, how this binary was built and which dependencies it has.
#include <fmt/format.h>

#include <iostream>

#include "launcher/commands.hpp"

namespace strata::launcher {

std::string version_line() {
  return fmt::format("strata {}", STRATA_VERSION);
}

std::string build_description() {
#if defined(__clang__)
  const std::string compiler =
      fmt::format("Clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  const std::string compiler =
      fmt::format("GCC {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  const std::string compiler = "unknown compiler";
#endif
  std::string type = STRATA_BUILD_TYPE;
  if (type.empty()) type = "no build type";
  return fmt::format("{}, {}, C++{}{}", type, compiler, __cplusplus / 100 % 100,
                     STRATA_BUILD_SANITIZE);
}

std::vector<BuildFeature> build_features() {
  const auto or_unknown = [](std::string s) {
    return s.empty() ? std::string("version unknown") : s;
  };
  return {
      {"MPI", true, fmt::format("MPI {}", or_unknown(STRATA_BUILD_MPI_VERSION))},
      {"HDF5", true, or_unknown(STRATA_BUILD_HDF5_VERSION)},
      {"BLAS", true, or_unknown(STRATA_BUILD_BLAS)},
      {"io_uring", STRATA_BUILD_URING != 0,
       STRATA_BUILD_URING ? fmt::format("liburing {}", STRATA_BUILD_URING_VERSION)
                          : "liburing not found"},
      {"CUDA", STRATA_BUILD_CUDA != 0,
       STRATA_BUILD_CUDA ? fmt::format("toolkit {}", STRATA_BUILD_CUDA_VERSION) : "not compiled"},
      {"NCCL", STRATA_BUILD_NCCL != 0,
       STRATA_BUILD_NCCL ? or_unknown(STRATA_BUILD_NCCL_VERSION) : "not compiled"},
  };
}

void add_version_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("version", "Print the version, build type and compiled-in features");
  cmd->callback([] {
    std::cout << version_line() << "\n";
    std::cout << "build: " << build_description() << "\n";
    for (const auto& f : build_features())
      std::cout << fmt::format("  {} {:<9} {}\n", f.compiled ? "✓" : "✗", f.name, f.detail);
  });
}

}  // namespace strata::launcher
