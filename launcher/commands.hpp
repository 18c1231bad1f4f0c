// The `strata` subcommands: each file cmd_*.cpp adds one subcommand to the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace strata::launcher {

void add_data_command(CLI::App& app);  // cmd_data.cpp: strata data prepare|inspect

}  // namespace strata::launcher
