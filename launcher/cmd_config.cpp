// strata config check|keys: validate a config and print it resolved; list every accepted key.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "framework/config/cli_options.hpp"
#include "framework/config/config.hpp"
#include "framework/config/deepspeed_keys.hpp"
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

// Every problem at once (one line each, exit status 1), or the notes on stderr and the resolved
// config on stdout.
void run_check(const CheckArgs& a) {
  const config::CheckResult r = config::check_config(a.options.document(), a.world_size);
  r.problems.raise_if_any(a.options.source());
  for (const auto& note : r.config.notes)
    std::cerr << fmt::format("strata: note: {}: {}\n", a.options.source(), note);
  std::cout << in_schema_order(config::to_json(r.config), "").dump(2) << "\n";
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
    case config::Kind::boolean_or_string:
      return "bool or string";
    case config::Kind::object:
      return "object";
  }
  return "?";
}

// DeepSpeed's keys that Strata's schema does not have: when each is accepted as a no-op, and
// what it asks for otherwise.
void run_deepspeed_keys(bool markdown) {
  const auto rows = config::deepspeed_key_rows();
  if (markdown) {
    std::cout << "| DeepSpeed key | accepted (ignored, with a note) at | otherwise |\n"
                 "| --- | --- | --- |\n";
    for (const auto& r : rows)
      std::cout << fmt::format("| `{}` | {} | {} |\n", r.key, r.noop_values, r.otherwise);
    return;
  }
  for (const auto& r : rows) {
    std::string values = r.noop_values;
    std::erase(values, '`');
    std::cout << fmt::format("{:<64} {}\n", r.key, values);
  }
}

void run_keys(bool markdown, bool deepspeed) {
  if (deepspeed) return run_deepspeed_keys(markdown);
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
      "with every default, as JSON; list every problem at once, and note DeepSpeed keys "
      "that change nothing");
  config::add_config_options(*check, args->options, true, "file");
  check
      ->add_option(
          "--world-size,-n", args->world_size,
          "Ranks the job would run on (decides the data-parallel size for the batch arithmetic)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  check->callback([args] { run_check(*args); });

  auto markdown = std::make_shared<bool>(false);
  auto deepspeed = std::make_shared<bool>(false);
  auto* keys = cmd->add_subcommand("keys", "List every accepted key with its type and default");
  keys->add_flag("--markdown", *markdown, "Print a Markdown table (as in docs/config.md)");
  keys->add_flag("--deepspeed", *deepspeed,
                 "List instead DeepSpeed's keys that Strata does not have: the values at which "
                 "each changes nothing (accepted with a note), and what it asks for otherwise");
  keys->callback([markdown, deepspeed] { run_keys(*markdown, *deepspeed); });
}

}  // namespace strata::launcher
