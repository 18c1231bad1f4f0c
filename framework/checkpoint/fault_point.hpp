// Fault injection for the save protocol, for tests: with STRATA_CHECKPOINT_FAULT set to
// "<point>@<step>" or "<point>@<step>@<rank>", the process kills itself with SIGKILL — as a lost
// node or `kill -9` would, nothing flushed — when the save of <step> reaches <point> (on <rank>,
// or on any rank). The points, in protocol order:
//   before_rank_file  the step directory exists; this rank has not created its file
//   rank_file_tmp     this rank's file is written and synced under its temporary name
//   after_rank_file   this rank's file has its final name
//   before_manifest   every rank's file is complete; rank 0 is about to write the manifest
//   manifest_tmp      manifest.json.tmp is written and synced, not renamed
//   after_manifest    manifest.json is in place; `latest` still names the previous checkpoint
//   after_latest      `latest` names this checkpoint; retention has not run
// With STRATA_CHECKPOINT_FAULT_FILE set to a path, a fault can also be armed while the job runs
// (the chaos soak, cluster/chaos): writing "<point>" or "<point>@<rank>" into that file makes the
// next save that reaches <point> (on <rank>, or on any rank) kill the process that gets there
// first; that process deletes the file, so the fault fires once.
#pragma once

#include <cstdint>
#include <string_view>

namespace strata::checkpoint {

// Kills the process when STRATA_CHECKPOINT_FAULT names this point, step and rank, or when the
// file STRATA_CHECKPOINT_FAULT_FILE names holds this point (and rank). The variable is read once;
// a malformed value or file is a UserError at the first call that reads it.
void fault_point(std::string_view point, std::int64_t step, int rank);

}  // namespace strata::checkpoint
