// `strata run` inside a Slurm allocation (launcher/run/slurm.hpp): Slurm's compressed host lists
// and tasks per node, and the mpirun command built from a faked allocation's environment.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "framework/core/error.hpp"
#include "launcher/run/command.hpp"
#include "launcher/run/slurm.hpp"

namespace strata::launcher::run {
namespace {

using Strings = std::vector<std::string>;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SlurmHostlist, single_host) { EXPECT_EQ(expand_hostlist("n1", "V"), Strings{"n1"}); }

TEST(SlurmHostlist, ranges_keep_padding) {
  EXPECT_EQ(expand_hostlist("node[01-03,07]", "V"),
            (Strings{"node01", "node02", "node03", "node07"}));
  EXPECT_EQ(expand_hostlist("n[8-10]", "V"), (Strings{"n8", "n9", "n10"}));
  EXPECT_EQ(expand_hostlist("n[098-100]", "V"), (Strings{"n098", "n099", "n100"}));
}

TEST(SlurmHostlist, several_groups) {
  EXPECT_EQ(expand_hostlist("node[01-02],gpu-a[1-2],login", "V"),
            (Strings{"node01", "node02", "gpu-a1", "gpu-a2", "login"}));
  EXPECT_EQ(expand_hostlist("r[1-2]n[1-2]", "V"), (Strings{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(expand_hostlist("a[1]-ib", "V"), Strings{"a1-ib"});
}

TEST(SlurmHostlist, bad_syntax_is_one_line_naming_the_variable) {
  for (const char* bad : {"node[1-3", "node1-3]", "node[a-b]", "node[3-1]", "node[]", "a,,b",
                          "node[1-2[3]]", "n[1-99999999999]"}) {
    const std::string e = error_of([&] { expand_hostlist(bad, "SLURM_JOB_NODELIST"); });
    EXPECT_NE(e.find("SLURM_JOB_NODELIST="), std::string::npos) << bad << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(SlurmTasks, repeats) {
  EXPECT_EQ(expand_tasks_per_node("2(x3),1", "V"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4", "V"), (std::vector<int>{4}));
  EXPECT_EQ(expand_tasks_per_node("1,3(x2)", "V"), (std::vector<int>{1, 3, 3}));
}

TEST(SlurmTasks, bad_syntax) {
  for (const char* bad : {"", "2(x3", "2(3)", "0", "x", "2,,1", "2(x0)"})
    EXPECT_NE(error_of([&] { expand_tasks_per_node(bad, "SLURM_TASKS_PER_NODE"); })
                  .find("SLURM_TASKS_PER_NODE="),
              std::string::npos)
        << bad;
}

// Random lists from Slurm's alphabet: each is expanded or refused with one line, never a crash,
// an exception of another kind or a hang.
TEST(SlurmHostlist, random_input_expands_or_is_one_line) {
  std::mt19937 rng(32);
  const std::string alphabet = "n[]-,0123456789(x)";
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const int len = 1 + static_cast<int>(rng() % 14);
    for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    for (int which = 0; which < 2; ++which) {
      try {
        if (which == 0) {
          for (const std::string& h : expand_hostlist(s, "V")) ASSERT_FALSE(h.empty()) << s;
        } else {
          for (int t : expand_tasks_per_node(s, "V")) ASSERT_GE(t, 1) << s;
        }
      } catch (const UserError& e) {
        ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << s;
      }
    }
  }
}

// A faked environment: only the listed variables are set.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> getenv() const {
    return [this](const char* k) -> const char* {
      const auto it = vars.find(k);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

FakeEnv two_nodes() {
  return {{{"SLURM_JOB_ID", "42"},
           {"SLURM_JOB_NODELIST", "n[1-2]"},
           {"SLURM_TASKS_PER_NODE", "2(x2)"},
           {"SLURM_NTASKS", "4"}}};
}

RunOptions no_n() {
  RunOptions o;
  o.ranks_given = false;
  o.program = {"/bin/true"};
  return o;
}

TEST(SlurmAllocation, hosts_and_ranks_from_the_environment) {
  const FakeEnv env = two_nodes();
  RunOptions o = no_n();
  apply_allocation(o, env.getenv());
  EXPECT_EQ(o.ranks, 4);
  EXPECT_EQ(o.hosts, "n1:2,n2:2");
  EXPECT_EQ(o.slurm_job, "42");

  // The launch command: mpirun over the allocation's hosts, not oversubscribed.
  PlanContext ctx;
  ctx.self_exe = "/x/strata";
  ctx.cores = 1;
  ctx.getenv = env.getenv();
  const LaunchPlan plan = build_plan(o, attempt_dirs("/tmp/logs", 1), ctx);
  EXPECT_FALSE(plan.direct);
  EXPECT_FALSE(plan.oversubscribed);
  const std::string line = plan.describe();
  EXPECT_NE(line.find("mpirun -np 4 --host n1:2,n2:2 -x STRATA_PROGRESS_DIR"), std::string::npos)
      << line;
}

TEST(SlurmAllocation, n_below_the_slots_and_ntasks_per_node) {
  FakeEnv env = two_nodes();
  env.vars.erase("SLURM_TASKS_PER_NODE");
  env.vars.erase("SLURM_NTASKS");
  env.vars["SLURM_NTASKS_PER_NODE"] = "3";
  RunOptions o = no_n();
  apply_allocation(o, env.getenv());
  EXPECT_EQ(o.ranks, 6);  // no SLURM_NTASKS: every slot
  EXPECT_EQ(o.hosts, "n1:3,n2:3");
  RunOptions two = no_n();
  two.ranks = 2;
  two.ranks_given = true;
  apply_allocation(two, env.getenv());
  EXPECT_EQ(two.ranks, 2);
}

TEST(SlurmAllocation, conflicts_say_what_to_do) {
  const FakeEnv env = two_nodes();
  RunOptions o = no_n();
  o.ranks = 5;
  o.ranks_given = true;
  EXPECT_EQ(error_of([&] { apply_allocation(o, env.getenv()); }),
            "[run] -n 5: Slurm job 42 has 4 slots (n1:2,n2:2): give -n 4 or less, or ask sbatch "
            "for more tasks (--ntasks-per-node, --nodes)");
  RunOptions h = no_n();
  h.hosts = "a:2";
  EXPECT_NE(error_of([&] { apply_allocation(h, env.getenv()); }).find("--host inside Slurm job 42"),
            std::string::npos);
  h.no_slurm = true;  // the advice works: the hosts are the user's
  apply_allocation(h, env.getenv());
  EXPECT_EQ(h.hosts, "a:2");

  FakeEnv mismatch = two_nodes();
  mismatch.vars["SLURM_TASKS_PER_NODE"] = "2(x3)";
  RunOptions m = no_n();
  EXPECT_NE(error_of([&] { apply_allocation(m, mismatch.getenv()); }).find("counts 3 nodes"),
            std::string::npos);
}

TEST(SlurmAllocation, outside_an_allocation_nothing_changes) {
  const FakeEnv env;
  RunOptions o = no_n();
  apply_allocation(o, env.getenv());
  EXPECT_TRUE(o.hosts.empty());
  EXPECT_NE(error_of([&] { validate(o); }).find("-n N is required"), std::string::npos);
}

}  // namespace
}  // namespace strata::launcher::run
