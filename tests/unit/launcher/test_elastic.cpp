// `strata run --nodes MIN:MAX` (launcher/run/elastic.hpp): the node range and its errors, the
// nodes of the next attempt, the data-parallel size and gradient accumulation that keep the
// global batch (and the refusal when it does not divide), and the nodes' health.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "framework/core/error.hpp"
#include "launcher/run/elastic.hpp"
#include "launcher/run/options.hpp"

namespace strata::launcher::run {
namespace {

std::string elastic_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_elastic_error(const std::function<void()>& f, const std::string& part) {
  const std::string e = elastic_error(f);
  EXPECT_NE(e.find(part), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

BatchLayout make_layout(int world, int mp, long long micro, long long accum, long long global) {
  BatchLayout l;
  l.world = world;
  l.model_parallel = mp;
  l.micro_batch = micro;
  l.accumulation = accum;
  l.global_batch = global;
  l.checkpoints = true;
  return l;
}

TEST(ElasticRange, min_max_and_single) {
  EXPECT_EQ(parse_node_range("1:2").min, 1);
  EXPECT_EQ(parse_node_range("1:2").max, 2);
  EXPECT_EQ(parse_node_range("3").min, 3);
  EXPECT_EQ(parse_node_range("3").max, 3);
}

TEST(ElasticRange, bad_ranges_are_one_line_saying_what_to_do) {
  expect_elastic_error([] { parse_node_range("2:1"); }, "write --nodes 1:2");
  expect_elastic_error([] { parse_node_range("0:2"); }, "MIN must be at least 1");
  expect_elastic_error([] { parse_node_range("0"); }, "MIN must be at least 1");
  for (const char* bad : {"", ":", "a:b", "1:", ":2", "1:2:3", "-1:2", "1.5:2", "99999999999"})
    expect_elastic_error([&] { parse_node_range(bad); }, "write MIN:MAX");
}

TEST(ElasticRange, checked_against_the_hosts) {
  const Nodes hosts = nodes_from_hosts("n1:2,n2:2");
  expect_elastic_error([&] { check_elastic({3, 3}, hosts, 0); }, "MIN 3 is above the 2 hosts");
  expect_elastic_error([&] { check_elastic({1, 3}, hosts, 0); }, "write --nodes 1:2");
  expect_elastic_error([&] { check_elastic({1, 2}, hosts, 3); }, "leave -n out");
  EXPECT_EQ(check_elastic({1, 2}, hosts, 4), hosts);
  EXPECT_EQ(check_elastic({1, 1}, hosts, 0), Nodes{hosts[0]});  // MAX 1: n2 is a spare
}

TEST(ElasticRange, options_validate_it) {
  RunOptions o;
  o.program = {"true"};
  o.ranks_given = false;  // -n may be left out with --nodes
  o.nodes = "1:2";
  expect_elastic_error([&] { validate(o); }, "--nodes 1:2 needs the nodes");
  o.hosts = "n1:2,n2:2";
  EXPECT_EQ(elastic_error([&] { validate(o); }), "(no error)");
  o.nodes = "2:1";
  expect_elastic_error([&] { validate(o); }, "MIN 2 is above MAX 1");
  o.nodes = "1:2";
  o.node_grace_s = -1;
  expect_elastic_error([&] { validate(o); }, "--node-grace");
  o.node_grace_s = 10;
  o.node_grace_given = true;
  o.nodes.clear();
  o.ranks_given = true;
  expect_elastic_error([&] { validate(o); }, "--node-grace is for elastic jobs");
}

TEST(ElasticNodes, hosts_need_slots_and_are_named_once) {
  EXPECT_EQ(nodes_from_hosts("a:2,b:3"), (Nodes{{"a", 2}, {"b", 3}}));
  expect_elastic_error([] { nodes_from_hosts("a:2,b"); }, "write --host b:RANKS");
  expect_elastic_error([] { nodes_from_hosts("a:2,a:2"); }, "host a is named twice");
  const std::string path = testing::TempDir() + "/elastic_hostfile";
  std::ofstream(path) << "# nodes\nn1 slots=2\nn2 slots=4 max_slots=8\n";
  EXPECT_EQ(nodes_from_hostfile(path), (Nodes{{"n1", 2}, {"n2", 4}}));
  std::ofstream(path) << "n1 slots=2\nn2\n";
  expect_elastic_error([&] { nodes_from_hostfile(path); }, "host n2 has no slots=N");
  std::remove(path.c_str());
}

TEST(ElasticNodes, ranks_fill_each_host_in_order) {
  const Nodes n = nodes_from_hosts("n1:2,n2:3");
  EXPECT_EQ(host_arg(n), "n1:2,n2:3");
  EXPECT_EQ(total_slots(n), 5);
  EXPECT_EQ(node_of_rank(n, 0), 0);
  EXPECT_EQ(node_of_rank(n, 1), 0);
  EXPECT_EQ(node_of_rank(n, 2), 1);
  EXPECT_EQ(node_of_rank(n, 4), 1);
  EXPECT_EQ(node_of_rank(n, 5), -1);
  EXPECT_EQ(node_of_rank(n, -1), -1);
}

TEST(ElasticNodes, the_next_attempt_takes_answering_healthy_nodes_up_to_max) {
  const Nodes all = nodes_from_hosts("n1:2,n2:2,n3:2");
  NodeHealth health;
  EXPECT_EQ(choose_nodes(all, {"n1", "n3"}, health, 3), (Nodes{{"n1", 2}, {"n3", 2}}));
  EXPECT_EQ(choose_nodes(all, {"n1", "n2", "n3"}, health, 2), (Nodes{{"n1", 2}, {"n2", 2}}));
  EXPECT_TRUE(choose_nodes(all, {}, health, 3).empty());
  health.record_failure({"n1", "n2", "n3"}, "n2");
  health.record_failure({"n1", "n2", "n3"}, "n2");
  EXPECT_EQ(choose_nodes(all, {"n1", "n2", "n3"}, health, 3), (Nodes{{"n1", 2}, {"n3", 2}}));
}

TEST(ElasticBatch, shrinking_keeps_the_global_batch_through_accumulation) {
  // 2 nodes x 2 ranks, tp 2: dp 2, micro 4, accumulation 1, global 8.
  const BatchLayout base = make_layout(4, 2, 4, 1, 8);
  const Resize one = plan_resize(base, 2);
  EXPECT_EQ(one.data_parallel, 1);
  EXPECT_EQ(one.accumulation, 2);
  const Resize back = plan_resize(base, 4);
  EXPECT_EQ(back.data_parallel, 2);
  EXPECT_EQ(back.accumulation, 1);
  EXPECT_EQ(batch_overrides(base, one),
            (std::vector<std::string>{"--set", "train_batch_size=8", "--set",
                                      "train_micro_batch_size_per_gpu=4", "--set",
                                      "gradient_accumulation_steps=2"}));
  // 4 nodes x 8 ranks at tp 8 (dp 4, accumulation 3): 3 nodes -> dp 3, accumulation 4.
  const Resize three = plan_resize(make_layout(32, 8, 2, 3, 24), 24);
  EXPECT_EQ(three.data_parallel, 3);
  EXPECT_EQ(three.accumulation, 4);
}

TEST(ElasticBatch, refuses_when_the_batch_does_not_divide) {
  // Global 8 = micro 4 x dp 2: on 3 data-parallel ranks it cannot be kept.
  expect_elastic_error([] { plan_resize(make_layout(2, 1, 4, 1, 8), 3); },
                       "cannot keep the global batch 8 on 3 ranks (data-parallel size 3): it is "
                       "not divisible by micro-batch 4 × dp 3 = 12; stopping");
  // Tensor parallel 2 cannot run on 3 ranks at all.
  expect_elastic_error([] { plan_resize(make_layout(4, 2, 4, 1, 8), 3); }, "not a multiple of it");
  // dp 4 x micro 4 = 16 does not divide 8 either (growing).
  expect_elastic_error([] { plan_resize(make_layout(2, 1, 4, 1, 8), 4); },
                       "micro-batch 4 × dp 4 = 16;");
}

TEST(ElasticBatch, the_layout_file_round_trips_and_incomplete_is_none) {
  const std::string dir = testing::TempDir() + "/elastic_layout";
  std::filesystem::create_directories(dir);
  std::ofstream(layout_path(dir)) << "world 4\nmodel_parallel 2\nmicro_batch 4\naccumulation "
                                     "1\nglobal_batch 8\ncheckpoints 1\n";
  const auto l = read_layout(dir);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->world, 4);
  EXPECT_EQ(l->data_parallel(), 2);
  EXPECT_EQ(l->global_batch, 8);
  EXPECT_TRUE(l->checkpoints);
  std::ofstream(layout_path(dir)) << "world 4\nmodel_parallel 2\n";
  EXPECT_FALSE(read_layout(dir));
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(read_layout(dir));
}

TEST(ElasticHealth, two_failures_in_a_row_leave_a_node_out) {
  NodeHealth h;
  const std::vector<std::string> both = {"n1", "n2"};
  EXPECT_FALSE(h.record_failure(both, "n2"));
  EXPECT_EQ(h.streak("n2"), 1);
  EXPECT_FALSE(h.record_failure(both, "n1"));  // another node failed: n2's streak ends
  EXPECT_EQ(h.streak("n2"), 0);
  EXPECT_FALSE(h.record_failure(both, "n2"));
  h.record_success(both);
  EXPECT_EQ(h.streak("n2"), 0);
  EXPECT_FALSE(h.record_failure(both, "n2"));
  EXPECT_FALSE(h.record_failure(both, ""));  // a hang blames nobody, and ends every streak
  EXPECT_FALSE(h.unhealthy("n2"));
  EXPECT_FALSE(h.record_failure(both, "n2"));
  EXPECT_TRUE(h.record_failure(both, "n2"));
  EXPECT_TRUE(h.unhealthy("n2"));
  EXPECT_FALSE(h.unhealthy("n1"));
  EXPECT_FALSE(h.record_failure(both, "n2"));  // reported once
}

TEST(ElasticBatch, describe_names_nodes_dp_and_accumulation) {
  const BatchLayout base = make_layout(4, 2, 4, 1, 8);
  const Nodes two = nodes_from_hosts("n1:2,n2:2");
  const std::string d =
      describe_resize(two, {two[0]}, base, plan_resize(base, 4), plan_resize(base, 2));
  EXPECT_EQ(d,
            "2 -> 1 node (n1): 4 -> 2 ranks, dp 2 -> 1, gradient accumulation 1 -> 2, global "
            "batch 8 kept");
}

}  // namespace
}  // namespace strata::launcher::run
