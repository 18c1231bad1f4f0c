// The `strata` command: parses the command line, runs one subcommand, and turns every error into
// one line on stderr and a non-zero exit status from framework/core/exit_status.hpp (no stack
// dumps for user mistakes).
#include <fmt/format.h>

#include <exception>
#include <iostream>

#include "framework/core/error.hpp"
#include "framework/core/exit_status.hpp"
#include "framework/memory/exit_report.hpp"
#include "launcher/commands.hpp"

namespace {

// "strata config check" for the subcommand the user was running, for the --help hint.
std::string command_path(const CLI::App* app) {
  std::string path = app->get_name().empty() ? "strata" : app->get_name();
  for (const CLI::App* cur = app;;) {
    const auto selected = cur->get_subcommands();
    if (selected.empty()) break;
    cur = selected.front();
    path += " " + cur->get_name();
  }
  return path;
}

// The innermost subcommand the user selected.
const CLI::App* innermost(const CLI::App* app) {
  while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
  return app;
}

std::string one_line(const CLI::App* app, const CLI::Error& e) {
  // "A subcommand is required" with a word left over means the word is not a command.
  const CLI::App* cur = innermost(app);
  const auto left = cur->remaining();
  if (e.get_name() == "RequiredError" && cur->get_require_subcommand_min() > 0 &&
      cur->get_subcommands().empty()) {
    std::string names;
    for (const CLI::App* sub : cur->get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    if (!left.empty())
      return fmt::format(
          "strata: error: '{}' is not a command of '{}'; commands: {} (see '{} --help')\n",
          left.front(), command_path(app), names, command_path(app));
    return fmt::format("strata: error: '{}' needs a command: {} (see '{} --help')\n",
                       command_path(app), names, command_path(app));
  }
  return fmt::format("strata: error: {} (see '{} --help')\n", e.what(), command_path(app));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "strata: train neural networks that do not fit in one device's memory "
      "(data/tensor/pipeline parallelism, ZeRO 1-3, offload to host and NVMe)",
      "strata"};
  app.set_version_flag("--version,-V", strata::launcher::version_line(),
                       "Print the version and exit");
  app.require_subcommand(1);
  // One line, bounded (an argument may be huge), whatever CLI11 objects to.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return strata::bounded_message(one_line(a, e)) + "\n";
  });
  app.footer(std::string(strata::kExitStatusHelp) + "\n");
  strata::launcher::add_ckpt_command(app);
  strata::launcher::add_config_command(app);
  strata::launcher::add_data_command(app);
  strata::launcher::add_env_command(app);
  strata::launcher::add_plan_command(app);
  strata::launcher::add_plot_command(app);
  strata::launcher::add_run_command(app);
  strata::launcher::add_version_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints the help, the version, or the one-line error
    return rc == 0 ? strata::kExitOk : strata::kExitUsage;
  } catch (const std::exception& e) {
    std::cout.flush();
    return strata::report_fatal("strata", e);  // one bounded line; the status of its kind
  }
  return strata::kExitOk;
}
