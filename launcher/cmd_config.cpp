// strata config check|keys: validate a config and print it resolved; list every accepted key.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "framework/config/cli_options.hpp"
#include "framework/config/config.hpp"
#include "framework/config/schema.hpp"
#include "framework/core/error.hpp"
#include "launcher/commands.hpp"

namespace strata::launcher {

namespace {

struct CheckArgs {
  config::ConfigOptions options;
  std::int64_t world_size = 1;
};

// The resolved document with keys in schema (documentation) order instead of alphabetical.
nlohmann::ordered_json in_schema_order(const config::json& doc, const std::string& prefix) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& k : config::schema()) {
    const std::string_view path = k.path;
    if (!prefix.empty() && path.rfind(prefix + ".", 0) != 0) continue;
    const std::string_view leaf = prefix.empty() ? path : path.substr(prefix.size() + 1);
    if (leaf.find('.') != std::string_view::npos) continue;  // not a direct child
    auto it = doc.find(std::string(leaf));
    if (it == doc.end()) continue;
    if (it->is_object())
      out[std::string(leaf)] = in_schema_order(*it, std::string(path));
    else
      out[std::string(leaf)] = nlohmann::ordered_json::parse(it->dump());
  }
  return out;
}

void run_check(const CheckArgs& a) {
  config::Config cfg = a.options.load();
  std::int64_t dp = 0;
  try {
    dp = config::data_parallel_size(cfg, a.world_size);
  } catch (const UserError& e) {
    throw UserError("config", fmt::format("{}: {}", a.options.path,
                                          std::string(e.what()).substr(e.tag().size() + 3)));
  }
  try {
    config::resolve_batch(cfg, dp);
  } catch (const UserError& e) {
    // Name the file and the world size the numbers came from.
    throw UserError("config",
                    fmt::format("{}: {} (world size {})", a.options.path,
                                std::string(e.what()).substr(e.tag().size() + 3), a.world_size));
  }
  std::cout << in_schema_order(config::to_json(cfg), "").dump(2) << "\n";
}

std::string kind_label(config::Kind k) {
  switch (k) {
    case config::Kind::boolean:
      return "bool";
    case config::Kind::integer:
      return "integer";
    case config::Kind::number:
      return "number";
    case config::Kind::string:
      return "string";
    case config::Kind::size:
      return "size";
    case config::Kind::number_pair:
      return "[number, number]";
    case config::Kind::number_or_pair:
      return "number or [number, number]";
    case config::Kind::object:
      return "object";
  }
  return "?";
}

void run_keys(bool markdown) {
  if (markdown) {
    std::cout << "| key | type | default | meaning |\n| --- | --- | --- | --- |\n";
    for (const auto& k : config::schema()) {
      std::string type = kind_label(k.kind);
      if (k.nullable) type += " or null";
      std::cout << fmt::format("| `{}` | {} | `{}` | {} |\n", k.path, type, k.default_value,
                               k.meaning);
    }
    return;
  }
  for (const auto& k : config::schema()) {
    if (k.kind == config::Kind::object) continue;
    std::cout << fmt::format("{:<56} {:<16} {}\n", k.path, kind_label(k.kind), k.default_value);
  }
}

}  // namespace

void add_config_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("config", "Validate configs and list the accepted keys");
  cmd->require_subcommand(1);

  auto args = std::make_shared<CheckArgs>();
  auto* check = cmd->add_subcommand(
      "check",
      "Validate a config (strictly, as a training job would) and print it resolved, "
      "with every default, as JSON");
  config::add_config_options(*check, args->options, true, "file");
  check
      ->add_option(
          "--world-size,-n", args->world_size,
          "Ranks the job would run on (decides the data-parallel size for the batch arithmetic)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  check->callback([args] { run_check(*args); });

  auto markdown = std::make_shared<bool>(false);
  auto* keys = cmd->add_subcommand("keys", "List every accepted key with its type and default");
  keys->add_flag("--markdown", *markdown, "Print a Markdown table (as in docs/config.md)");
  keys->callback([markdown] { run_keys(*markdown); });
}

}  // namespace strata::launcher
