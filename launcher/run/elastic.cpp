#include "launcher/run/elastic.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/core/error.hpp"

namespace strata::launcher::run {

namespace {

// A whole positive number, or -1.
long long positive(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::atoll(s.c_str());
}

void add_node(Nodes& out, const std::string& host, int slots, const std::string& where) {
  for (const Node& n : out)
    if (n.host == host)
      user_fail("run",
                "--nodes: host {} is named twice in {}; name each node once, with all its "
                "slots",
                host, where);
  out.push_back({host, slots});
}

}  // namespace

NodeRange parse_node_range(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string a = spec.substr(0, colon);
  const std::string b = colon == std::string::npos ? a : spec.substr(colon + 1);
  const long long lo = positive(a), hi = positive(b);
  if (lo < 0 || hi < 0 || (colon != std::string::npos && b.find(':') != std::string::npos))
    user_fail("run", "--nodes {}: write MIN:MAX (e.g. --nodes 1:2) or N, with whole numbers", spec);
  if (lo < 1)
    user_fail("run", "--nodes {}: MIN must be at least 1 (the job needs a node to run on)", spec);
  if (lo > hi)
    user_fail("run", "--nodes {}: MIN {} is above MAX {}; write --nodes {}:{}", spec, lo, hi, hi,
              lo);
  return {static_cast<int>(lo), static_cast<int>(hi)};
}

Nodes nodes_from_hosts(const std::string& hosts) {
  Nodes out;
  std::stringstream ss(hosts);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto colon = item.rfind(':');
    if (colon == std::string::npos)
      user_fail("run",
                "--nodes: host {} has no slot count; write --host {}:RANKS (the ranks each "
                "node runs)",
                item, item);
    const long long slots = positive(item.substr(colon + 1));
    if (slots < 1)
      user_fail("run", "--host {}: '{}' is not a positive slot count (write host:slots)", hosts,
                item.substr(colon + 1));
    add_node(out, item.substr(0, colon), static_cast<int>(slots), "--host");
  }
  if (out.empty()) user_fail("run", "--host '{}' names no host", hosts);
  return out;
}

Nodes nodes_from_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) user_fail("run", "cannot open hostfile {}", path);
  Nodes out;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::stringstream ss(line);
    std::string host, word;
    if (!(ss >> host)) continue;
    long long slots = -1;
    while (ss >> word)
      if (word.rfind("slots=", 0) == 0) slots = positive(word.substr(6));
    if (slots < 1)
      user_fail("run",
                "--nodes: hostfile {}: host {} has no slots=N; an elastic job needs each "
                "node's ranks (write '{} slots=4')",
                path, host, host);
    add_node(out, host, static_cast<int>(slots), "hostfile " + path);
  }
  if (out.empty()) user_fail("run", "hostfile {} names no host", path);
  return out;
}

Nodes check_elastic(const NodeRange& range, const Nodes& hosts, int ranks) {
  const int n = static_cast<int>(hosts.size());
  if (range.min > n)
    user_fail("run",
              "--nodes {}:{}: MIN {} is above the {} host{} given ({}); give more hosts or "
              "a smaller MIN",
              range.min, range.max, range.min, n, n == 1 ? "" : "s", host_names(hosts));
  if (range.max > n)
    user_fail("run",
              "--nodes {}:{}: MAX {} is above the {} host{} given ({}); list every node "
              "the job may use (--host/--hostfile), or write --nodes {}:{}",
              range.min, range.max, range.max, n, n == 1 ? "" : "s", host_names(hosts), range.min,
              n);
  const Nodes first(hosts.begin(), hosts.begin() + range.max);
  if (ranks > 0 && ranks != total_slots(first))
    user_fail("run",
              "-n {} with --nodes: the job runs every slot of the nodes it uses ({} on {}); "
              "leave -n out",
              ranks, total_slots(first), host_arg(first));
  return first;
}

std::string host_arg(const Nodes& nodes) {
  std::string s;
  for (const Node& n : nodes) s += fmt::format("{}{}:{}", s.empty() ? "" : ",", n.host, n.slots);
  return s;
}

std::string host_names(const Nodes& nodes) {
  std::string s;
  for (const Node& n : nodes) s += (s.empty() ? "" : ",") + n.host;
  return s;
}

int total_slots(const Nodes& nodes) {
  int t = 0;
  for (const Node& n : nodes) t += n.slots;
  return t;
}

int node_of_rank(const Nodes& nodes, int rank) {
  if (rank < 0) return -1;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (rank < nodes[i].slots) return static_cast<int>(i);
    rank -= nodes[i].slots;
  }
  return -1;
}

std::string layout_path(const std::string& progress_dir) {
  return (std::filesystem::path(progress_dir) / "layout").string();
}

std::optional<BatchLayout> read_layout(const std::string& progress_dir) {
  std::ifstream in(layout_path(progress_dir));
  if (!in) return std::nullopt;
  BatchLayout l;
  std::string key;
  long long v = 0;
  int got = 0;
  while (in >> key >> v) {
    if (key == "world")
      l.world = static_cast<int>(v), got |= 1;
    else if (key == "model_parallel")
      l.model_parallel = static_cast<int>(v), got |= 2;
    else if (key == "micro_batch")
      l.micro_batch = v, got |= 4;
    else if (key == "accumulation")
      l.accumulation = v, got |= 8;
    else if (key == "global_batch")
      l.global_batch = v, got |= 16;
    else if (key == "checkpoints")
      l.checkpoints = v != 0, got |= 32;
  }
  if (got != 63 || l.world < 1 || l.model_parallel < 1 || l.micro_batch < 1) return std::nullopt;
  return l;
}

Resize plan_resize(const BatchLayout& base, int world) {
  if (world < 1 || world % base.model_parallel != 0)
    user_fail("run",
              "cannot run on {} rank{}: the job's tensor × pipeline parallel size is {}, and "
              "{} is not a multiple of it; give nodes whose slots add up to a multiple of {}",
              world, world == 1 ? "" : "s", base.model_parallel, world, base.model_parallel);
  const int dp = world / base.model_parallel;
  const long long per_step = base.micro_batch * dp;
  if (base.global_batch % per_step != 0)
    user_fail("run",
              "cannot keep the global batch {} on {} rank{} (data-parallel size {}): it is "
              "not divisible by micro-batch {} × dp {} = {}; stopping (choose a global batch "
              "that every allowed node count divides, or a narrower --nodes)",
              base.global_batch, world, world == 1 ? "" : "s", dp, base.micro_batch, dp, per_step);
  return {world, dp, base.global_batch / per_step};
}

std::vector<std::string> batch_overrides(const BatchLayout& base, const Resize& r) {
  return {"--set", fmt::format("train_batch_size={}", base.global_batch),
          "--set", fmt::format("train_micro_batch_size_per_gpu={}", base.micro_batch),
          "--set", fmt::format("gradient_accumulation_steps={}", r.accumulation)};
}

bool NodeHealth::record_failure(const std::vector<std::string>& ran_on, const std::string& failed) {
  for (const std::string& h : ran_on)
    if (h != failed) streak_[h] = 0;
  if (failed.empty()) return false;
  if (++streak_[failed] >= 2 && excluded_.insert(failed).second) return true;
  return false;
}

void NodeHealth::record_success(const std::vector<std::string>& ran_on) {
  for (const std::string& h : ran_on) streak_[h] = 0;
}

int NodeHealth::streak(const std::string& host) const {
  const auto it = streak_.find(host);
  return it == streak_.end() ? 0 : it->second;
}

Nodes choose_nodes(const Nodes& all, const std::set<std::string>& answering,
                   const NodeHealth& health, int max) {
  Nodes out;
  for (const Node& n : all)
    if (static_cast<int>(out.size()) < max && answering.count(n.host) && !health.unhealthy(n.host))
      out.push_back(n);
  return out;
}

std::string describe_resize(const Nodes& from, const Nodes& to, const BatchLayout& base,
                            const Resize& before, const Resize& after) {
  return fmt::format(
      "{} -> {} node{} ({}): {} -> {} ranks, dp {} -> {}, gradient accumulation "
      "{} -> {}, global batch {} kept",
      from.size(), to.size(), to.size() == 1 ? "" : "s", host_names(to), before.world, after.world,
      before.data_parallel, after.data_parallel, before.accumulation, after.accumulation,
      base.global_batch);
}

}  // namespace strata::launcher::run
