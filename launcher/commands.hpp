// The `strata` subcommands: each file cmd_*.cpp adds one subcommand to the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace strata::launcher {

void add_data_command(CLI::App& app);     // cmd_data.cpp: strata data prepare|inspect
void add_ckpt_command(CLI::App& app);     // cmd_ckpt.cpp: strata ckpt inspect|verify|export|import
void add_env_command(CLI::App& app);      // cmd_env.cpp: strata env (like DeepSpeed's ds_report)
void add_config_command(CLI::App& app);   // cmd_config.cpp: strata config check|keys
void add_version_command(CLI::App& app);  // cmd_version.cpp: strata version
void add_run_command(CLI::App& app);      // cmd_run.cpp: strata run (and the hidden _rank)
void add_plot_command(CLI::App& app);     // cmd_plot.cpp: strata plot (metrics → PNG/SVG)
void add_plan_command(CLI::App& app);     // cmd_plan.cpp: strata plan (memory planner)

// "strata 0.1.0" (cmd_version.cpp; also `strata --version`).
std::string version_line();

// A dependency as this binary was built: compiled in or not, and the version CMake found.
struct BuildFeature {
  std::string name;
  bool compiled;
  std::string detail;
};
std::vector<BuildFeature> build_features();  // cmd_version.cpp
std::string build_description();             // "Release, GCC 12.2.0, C++20"

}  // namespace strata::launcher
