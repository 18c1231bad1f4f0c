// strata data: placeholder until the data pipeline lands.
#include "launcher/commands.hpp"

namespace strata::launcher {

void add_data_command(CLI::App& app) {
  app.add_subcommand("data", "Prepare and inspect token files (not yet available)");
}

}  // namespace strata::launcher
