#include "launcher/run/slurm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <numeric>

#include "framework/core/error.hpp"

namespace strata::launcher::run {

namespace {

constexpr std::size_t kMaxHosts = 1'000'000;  // a typo like node[1-99999999] must not eat memory

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// Splits at the commas outside brackets.
std::vector<std::string> split_top(const std::string& s, const std::string& what) {
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) user_fail("run", "{}={}: ']' without '['", what, s);
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) user_fail("run", "{}={}: '[' without ']'", what, s);
  items.push_back(cur);
  return items;
}

void expand_name(const std::string& full, const std::string& name, const std::string& what,
                 std::vector<std::string>& out) {
  const auto lb = name.find('[');
  if (lb == std::string::npos) {
    out.push_back(name);
    return;
  }
  const auto rb = name.find(']', lb);
  const std::string prefix = name.substr(0, lb), inner = name.substr(lb + 1, rb - lb - 1),
                    rest = name.substr(rb + 1);
  if (inner.find('[') != std::string::npos)
    user_fail("run", "{}={}: brackets cannot nest", what, full);
  std::vector<std::string> tails;
  expand_name(full, rest, what, tails);
  std::size_t start = 0;
  for (;;) {
    const auto comma = inner.find(',', start);
    const std::string range = inner.substr(start, comma - start);
    const auto dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9)
      user_fail("run", "{}={}: '[{}]': '{}' is not a number or a range like 01-04", what, full,
                inner, range);
    const long a = std::stol(lo), b = std::stol(hi);
    if (a > b) user_fail("run", "{}={}: range '{}' runs backwards", what, full, range);
    for (long i = a; i <= b; ++i) {
      if (out.size() + tails.size() > kMaxHosts)
        user_fail("run", "{}={}: more than {} hosts", what, full, kMaxHosts);
      for (const std::string& t : tails)
        out.push_back(fmt::format("{}{:0{}}{}", prefix, i, lo.size(), t));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

int positive(const std::string& s, const std::string& what, const std::string& full) {
  if (!all_digits(s) || s.size() > 6 || std::stoi(s) < 1)
    user_fail("run", "{}={}: '{}' is not a positive count", what, full, s);
  return std::stoi(s);
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list, const std::string& what) {
  std::vector<std::string> hosts;
  for (const std::string& item : split_top(list, what)) {
    if (item.empty()) user_fail("run", "{}='{}': an empty host name", what, list);
    expand_name(list, item, what, hosts);
  }
  return hosts;
}

std::vector<int> expand_tasks_per_node(const std::string& spec, const std::string& what) {
  std::vector<int> tasks;
  std::size_t start = 0;
  for (;;) {
    const auto comma = spec.find(',', start);
    const std::string item = spec.substr(start, comma - start);
    const auto paren = item.find("(x");
    if (paren == std::string::npos) {
      tasks.push_back(positive(item, what, spec));
    } else {
      if (item.back() != ')')
        user_fail("run", "{}={}: '{}' is not N or N(xM)", what, spec, item);
      const int n = positive(item.substr(0, paren), what, spec);
      const int times = positive(item.substr(paren + 2, item.size() - paren - 3), what, spec);
      tasks.insert(tasks.end(), times, n);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return tasks;
}

int SlurmAllocation::total_slots() const { return std::accumulate(slots.begin(), slots.end(), 0); }

std::string SlurmAllocation::host_arg() const {
  std::string s;
  for (std::size_t i = 0; i < hosts.size(); ++i)
    s += fmt::format("{}{}:{}", i ? "," : "", hosts[i], slots[i]);
  return s;
}

SlurmAllocation read_allocation(const std::function<const char*(const char*)>& getenv) {
  SlurmAllocation a;
  const char* id = getenv("SLURM_JOB_ID");
  if (!id || !*id) return a;
  a.job_id = id;
  const char* var = "SLURM_JOB_NODELIST";
  const char* nodes = getenv(var);
  if (!nodes) nodes = getenv(var = "SLURM_NODELIST");
  if (!nodes || !*nodes)
    user_fail("run", "SLURM_JOB_ID={} is set but SLURM_JOB_NODELIST is not: run inside sbatch or "
              "salloc, or add --no-slurm and give the hosts", a.job_id);
  a.hosts = expand_hostlist(nodes, var);
  if (const char* t = getenv("SLURM_TASKS_PER_NODE"); t && *t) {
    a.slots = expand_tasks_per_node(t, "SLURM_TASKS_PER_NODE");
    if (a.slots.size() != a.hosts.size())
      user_fail("run", "SLURM_TASKS_PER_NODE={} counts {} nodes but {}={} names {}: add --no-slurm "
                "and give the hosts", t, a.slots.size(), var, nodes, a.hosts.size());
  } else if (const char* n = getenv("SLURM_NTASKS_PER_NODE"); n && *n) {
    a.slots.assign(a.hosts.size(), positive(n, "SLURM_NTASKS_PER_NODE", n));
  } else {
    user_fail("run", "Slurm job {}: neither SLURM_TASKS_PER_NODE nor SLURM_NTASKS_PER_NODE is "
              "set: ask sbatch for --ntasks-per-node, or add --no-slurm and give the hosts",
              a.job_id);
  }
  if (const char* n = getenv("SLURM_NTASKS"); n && *n) a.ntasks = positive(n, "SLURM_NTASKS", n);
  return a;
}

void apply_allocation(RunOptions& o, const std::function<const char*(const char*)>& getenv) {
  const char* id = getenv("SLURM_JOB_ID");
  if (o.no_slurm || !id || !*id) return;
  if (!o.hosts.empty() || !o.hostfile.empty())
    user_fail("run", "{} inside Slurm job {}: strata run takes the hosts from the allocation; "
              "leave {} out, or add --no-slurm to choose the hosts yourself",
              o.hosts.empty() ? "--hostfile" : "--host", id,
              o.hosts.empty() ? "--hostfile" : "--host");
  const SlurmAllocation a = read_allocation(getenv);
  if (!o.ranks_given) o.ranks = a.ntasks > 0 ? a.ntasks : a.total_slots();
  if (o.ranks > a.total_slots())
    user_fail("run", "-n {}: Slurm job {} has {} slots ({}): give -n {} or less, or ask sbatch "
              "for more tasks (--ntasks-per-node, --nodes)", o.ranks, a.job_id, a.total_slots(),
              a.host_arg(), a.total_slots());
  o.hosts = a.host_arg();
  o.slurm_job = a.job_id;
  o.ranks_given = true;
}

}  // namespace strata::launcher::run
