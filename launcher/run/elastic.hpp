// Elastic restarts (`strata run --nodes MIN:MAX`): the pure decisions — which nodes an attempt
// runs on, the data-parallel size and gradient accumulation that keep the global batch on them,
// and which nodes' ranks keep failing. The supervisor probes the nodes and launches
// (supervisor.cpp, node_probe.hpp); docs/launcher.md, "Elastic restarts", says what the user sees.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace strata::launcher::run {

// --nodes MIN:MAX (or N = N:N). max == 0: not elastic.
struct NodeRange {
  int min = 0, max = 0;
  bool elastic() const { return max > 0; }
};
// Throws UserError (one line) for anything but "N" or "MIN:MAX" with 1 <= MIN <= MAX.
NodeRange parse_node_range(const std::string& spec);

struct Node {
  std::string host;
  int slots = 0;  // ranks it runs
  bool operator==(const Node&) const = default;
};
using Nodes = std::vector<Node>;

// The hosts of --host "h1:2,h2:2" or a hostfile ("h1 slots=2" per line), each with its slot
// count, which an elastic job needs (it runs `slots` ranks on each node it uses). Throws
// UserError naming the host without a slot count, or a host named twice.
Nodes nodes_from_hosts(const std::string& hosts);
Nodes nodes_from_hostfile(const std::string& path);

// Checks --nodes against the hosts given (MIN above the hosts, MAX above the hosts, -n that is
// not the slots of the nodes the job starts on); one-line UserErrors saying what to do.
// `ranks` is -n (0: not given). Returns the nodes the first attempt runs on: the first MAX.
Nodes check_elastic(const NodeRange& range, const Nodes& hosts, int ranks);

std::string host_arg(const Nodes& nodes);    // "n1:2,n2:2" (mpirun's --host)
std::string host_names(const Nodes& nodes);  // "n1,n2"
int total_slots(const Nodes& nodes);
// The node (index into `nodes`) that runs world rank `rank`: mpirun fills each host's slots in
// order (its default mapping). -1 when the rank is beyond the slots.
int node_of_rank(const Nodes& nodes, int rank);

// What the program reports about its batch: rank 0 writes $STRATA_PROGRESS_DIR/layout at start
// ("world 4\nmodel_parallel 2\nmicro_batch 4\naccumulation 1\nglobal_batch 8\ncheckpoints 1\n";
// train_gpt does, launcher/job/progress_file.hpp).
struct BatchLayout {
  int world = 0;
  int model_parallel = 1;  // tensor × pipeline parallel size: kept when the job resizes
  long long micro_batch = 0, accumulation = 0, global_batch = 0;
  bool checkpoints = false;  // the program saves checkpoints (it can resume on another size)
  int data_parallel() const { return model_parallel > 0 ? world / model_parallel : 0; }
};
std::string layout_path(const std::string& progress_dir);
// nullopt when the file is missing or incomplete.
std::optional<BatchLayout> read_layout(const std::string& progress_dir);

// The job on `world` ranks with the same global batch: the micro-batch is kept (memory), the
// gradient accumulation changes.
struct Resize {
  int world = 0, data_parallel = 0;
  long long accumulation = 0;
};
// Throws UserError (one line) when `world` is not a multiple of the model-parallel size or the
// global batch is not divisible by micro-batch × the new dp size.
Resize plan_resize(const BatchLayout& base, int world);
// The program arguments that make the ranks use it ("--set" "train_batch_size=8" ...): real
// config keys, checked by the program against its data-parallel size (train_batch_size =
// micro × accumulation × dp), never accepted and ignored.
std::vector<std::string> batch_overrides(const BatchLayout& base, const Resize& r);

// Which nodes' ranks fail attempt after attempt: a node that had the first failing rank of two
// attempts in a row is left out for the rest of the job.
class NodeHealth {
 public:
  // After a failed attempt: the node whose rank failed first ("" when none is to blame, e.g.
  // the watchdog ended a hung job), among the nodes the attempt ran on. Returns true when this
  // made `failed` unhealthy.
  bool record_failure(const std::vector<std::string>& ran_on, const std::string& failed);
  void record_success(const std::vector<std::string>& ran_on);
  bool unhealthy(const std::string& host) const { return excluded_.count(host) > 0; }
  int streak(const std::string& host) const;
  const std::set<std::string>& excluded() const { return excluded_; }

 private:
  std::map<std::string, int> streak_;  // failed attempts in a row
  std::set<std::string> excluded_;
};

// The nodes of the next attempt: in the order given, those that answer and are healthy, at
// most `max`.
Nodes choose_nodes(const Nodes& all, const std::set<std::string>& answering,
                   const NodeHealth& health, int max);

// "2 -> 1 nodes (n1)" style description of a change, with dp and accumulation:
// "2 -> 1 nodes (n1): dp 2 -> 1, gradient accumulation 1 -> 2, global batch 8 kept".
std::string describe_resize(const Nodes& from, const Nodes& to, const BatchLayout& base,
                            const Resize& before, const Resize& after);

}  // namespace strata::launcher::run
