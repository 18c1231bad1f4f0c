// Deleting the files of removed checkpoints off the critical path. Freeing a large file's blocks
// is slow on some file systems (ext4 mounted with `discard`: ~25 ms per 160 MB, in the unlink),
// so a removal makes the checkpoint disappear durably and at once — the caller has removed its
// manifest; reclaim() renames the directory to "<root>/.deleting-<name>.<pid>.<n>" — and a background
// thread at idle CPU priority deletes the files. A ".deleting-" directory left by a crash is
// queued again by the next retention (reclaim_leftovers).
#pragma once

#include <string>
#include <string_view>

namespace strata::checkpoint {

inline constexpr std::string_view kDeletingPrefix = ".deleting-";

// Renames dir to <parent>/.deleting-<name>.<pid>.<n> (durably) and queues it for deletion. Throws
// strata::Error if the rename fails.
void reclaim(const std::string& dir);
// Queues every ".deleting-" entry under root that is not queued yet.
void reclaim_leftovers(const std::string& root);
// Blocks until every queued deletion has finished (tests, benchmarks; also done at exit).
void wait_for_reclaim();

}  // namespace strata::checkpoint
