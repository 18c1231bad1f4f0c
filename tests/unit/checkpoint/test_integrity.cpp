// Loading never trusts a file: corrupt bytes, truncated or missing rank files, a missing
// manifest and a `latest` that names a broken step are all detected, named, and (for resume)
// skipped with a warning in favour of the previous complete checkpoint.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <functional>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/latest.hpp"
#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/shard_file.hpp"
#include "framework/checkpoint/verify.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;
using testing::throws_with;
namespace fs = std::filesystem;

const std::string kWte = "transformer.wte.weight";

std::vector<float> read_all(CheckpointReader& r, const std::string& kind, const std::string& name) {
  return r.read_f32(kind, name);
}

TEST(Integrity, CorruptByteIsCaughtAndNamed) {
  TempDir tmp;
  const std::string dir = testing::save_toy(tmp.str(), 5, 2);
  const std::string file = dir + "/rank_00000.h5";
  const std::string dataset = "/exp_avg/" + kWte;
  EXPECT_TRUE(verify_checkpoint(dir).ok());
  testing::flip_byte(file, testing::dataset_offset(file, dataset) + 9);

  CheckpointReader r(dir);
  EXPECT_NO_THROW(read_all(r, "param", kWte));  // other datasets are intact
  try {
    read_all(r, "exp_avg", kWte);
    FAIL() << "corruption not detected";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.file(), file);
    EXPECT_EQ(e.dataset(), dataset);
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  const VerifyReport rep = verify_checkpoint(dir);
  ASSERT_EQ(rep.faults.size(), 1u);
  EXPECT_NE(rep.faults[0].find(file), std::string::npos);
  EXPECT_NE(rep.faults[0].find(dataset), std::string::npos);
  // The structural check does not read data, so it passes.
  EXPECT_TRUE(verify_checkpoint(dir, VerifyLevel::structure).ok());
}

TEST(Integrity, TruncatedFileIsCaught) {
  TempDir tmp;
  const std::string dir = testing::save_toy(tmp.str(), 5, 3);
  const std::string file = dir + "/rank_00001.h5";
  fs::resize_file(file, fs::file_size(file) / 2);
  CheckpointReader r(dir);
  EXPECT_TRUE(throws_with<CheckpointError>(
      [&] { read_all(r, "param", "transformer.h.0.attn.c_attn.weight"); }, {file, "truncated"}));
  const VerifyReport rep = verify_checkpoint(dir, VerifyLevel::structure);
  ASSERT_EQ(rep.faults.size(), 1u);
  EXPECT_NE(rep.faults[0].find("rank_00001.h5: file is"), std::string::npos) << rep.faults[0];
}

TEST(Integrity, MissingRankFileIsCaught) {
  TempDir tmp;
  const std::string dir = testing::save_toy(tmp.str(), 5, 4);
  fs::remove(dir + "/rank_00002.h5");
  CheckpointReader r(dir);
  EXPECT_TRUE(throws_with<CheckpointError>(
      [&] { read_all(r, "param", "transformer.h.0.attn.c_attn.weight"); },
      {"rank_00002.h5", "missing"}));
  const VerifyReport rep = verify_checkpoint(dir);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.faults[0].find("rank_00002.h5: rank file is missing"), std::string::npos);
}

TEST(Integrity, ForeignFileWithRightSizeIsCaught) {
  TempDir tmp;
  const std::string a = testing::save_toy(tmp / "a", 5, 2);
  const std::string b = testing::save_toy(tmp / "b", 6, 2);
  // Same size (same layout), different step: its HDF5 bytes (header, attributes) disagree with the
  // manifest's record of them, before HDF5 reads any of it.
  fs::copy_file(b + "/rank_00001.h5", a + "/rank_00001.h5", fs::copy_options::overwrite_existing);
  const VerifyReport rep = verify_checkpoint(a);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.faults[0].find("rank_00001.h5: HDF5's bytes (metadata) do not match the manifest"),
            std::string::npos)
      << rep.faults[0];
}

TEST(Integrity, WithoutManifestItIsNotACheckpoint) {
  TempDir tmp;
  const std::string dir = testing::save_toy(tmp.str(), 5, 2);
  fs::remove(dir + "/manifest.json");
  EXPECT_TRUE(throws_with<CheckpointError>([&] { CheckpointReader r(dir); }, {"no manifest"}));
  EXPECT_TRUE(list_complete_checkpoints(tmp.str()).empty());
  EXPECT_EQ(list_step_dirs(tmp.str()).size(), 1u);
  EXPECT_FALSE(verify_checkpoint(dir).ok());
}

TEST(Integrity, RankStateIsCheckedAgainstTheManifest) {
  TempDir tmp;
  const std::string dir = testing::save_toy(tmp.str(), 5, 2);
  const auto m = read_manifest(dir);
  ShardFile f(dir + "/rank_00001.h5");
  EXPECT_NO_THROW(f.rank_state(&m.files[1].state_checksum));
  const std::uint32_t other = m.files[1].state_checksum ^ 1u;
  EXPECT_TRUE(throws_with<CheckpointError>([&] { f.rank_state(&other); },
                                           {"rank_00001.h5", "/state/rank", "checksum mismatch"}));
}

class FindLatest : public ::testing::Test {
 protected:
  std::vector<std::string> warnings;
  FindOptions options() {
    FindOptions o;
    o.warn = [this](const std::string& w) { warnings.push_back(w); };
    return o;
  }
};

TEST_F(FindLatest, FollowsLatest) {
  TempDir tmp;
  EXPECT_FALSE(find_latest(tmp.str(), options()));  // empty root: no checkpoint
  EXPECT_FALSE(find_latest(tmp / "does-not-exist", options()));
  testing::save_toy(tmp.str(), 10, 2);
  testing::save_toy(tmp.str(), 20, 2);
  EXPECT_EQ(read_latest(tmp.str()), "step_00000020");
  const auto found = find_latest(tmp.str(), options());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 20);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(resolve_checkpoint_dir(tmp.str()), tmp / "step_00000020");
  EXPECT_EQ(resolve_checkpoint_dir(tmp / "step_00000010"), tmp / "step_00000010");
}

TEST_F(FindLatest, LatestOnIncompleteStepFallsBackWithWarning) {
  TempDir tmp;
  testing::save_toy(tmp.str(), 10, 2);
  const std::string d20 = testing::save_toy(tmp.str(), 20, 2);
  fs::remove(d20 + "/rank_00001.h5");  // step 20 incomplete, `latest` still names it
  const auto found = find_latest(tmp.str(), options());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 10);
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("rank_00001.h5"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("falling back"), std::string::npos) << warnings[0];

  FindOptions strict = options();
  strict.fallback = false;
  EXPECT_TRUE(
      throws_with<CheckpointError>([&] { find_latest(tmp.str(), strict); }, {"rank_00001.h5"}));
}

TEST_F(FindLatest, CorruptDataIsSkippedAtFullVerification) {
  TempDir tmp;
  testing::save_toy(tmp.str(), 10, 2);
  const std::string d20 = testing::save_toy(tmp.str(), 20, 2);
  const std::string file = d20 + "/rank_00000.h5";
  testing::flip_byte(file, testing::dataset_offset(file, "/param/" + kWte));
  FindOptions o = options();
  EXPECT_EQ(find_latest(tmp.str(), o)->step, 20);  // structure only: looks fine
  o.level = VerifyLevel::full;
  EXPECT_EQ(find_latest(tmp.str(), o)->step, 10);
}

TEST_F(FindLatest, NewerCompleteCheckpointWinsOverStalePointer) {
  TempDir tmp;
  testing::save_toy(tmp.str(), 10, 1);
  testing::save_toy(tmp.str(), 20, 1);
  update_latest_atomic(tmp.str(), "step_00000010");  // as if we crashed between manifest and latest
  const auto found = find_latest(tmp.str(), options());
  EXPECT_EQ(found->step, 20);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("newer and complete"), std::string::npos);
}

TEST_F(FindLatest, NothingUsableIsAnErrorNotAFreshStart) {
  TempDir tmp;
  const std::string d = testing::save_toy(tmp.str(), 10, 1);
  fs::remove(d + "/manifest.json");
  EXPECT_TRUE(throws_with<CheckpointError>([&] { find_latest(tmp.str(), options()); },
                                           {"no usable checkpoint", "step_00000010"}));
  // A `latest` naming a directory that is gone.
  TempDir tmp2;
  update_latest_atomic(tmp2.str(), "step_00000300");
  EXPECT_TRUE(throws_with<CheckpointError>([&] { find_latest(tmp2.str(), options()); },
                                           {"step_00000300", "does not exist"}));
  write_file_atomic(tmp2 / "latest", "../../etc\n");
  EXPECT_TRUE(throws_with<UserError>([&] { resolve_checkpoint_dir(tmp2.str()); },
                                     {"latest", "not a step"}));
}

// A job killed during a save (its first, or a later one) leaves a step directory without a
// manifest: a save that never committed, not a broken checkpoint. It is ignored (with a warning
// when newer than the checkpoint chosen); with nothing committed, the job starts fresh.
TEST_F(FindLatest, UncommittedStepDirectoryIsNotACheckpoint) {
  TempDir tmp;
  fs::create_directories(tmp / "step_00000005");
  write_file_atomic(tmp / "step_00000005/rank_00000.h5.tmp", "partial");
  write_file_atomic(tmp / "step_00000005/manifest.json.tmp", "{");
  EXPECT_FALSE(find_latest(tmp.str(), options()));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("ignoring " + tmp / "step_00000005" +
                             " (no manifest.json: a save that "
                             "did not finish)"),
            std::string::npos)
      << warnings[0];

  // A committed step 10, then a save of step 20 killed after its rank files: step 10 it is.
  warnings.clear();
  testing::save_toy(tmp.str(), 10, 2);
  const std::string d20 = testing::save_toy(tmp.str(), 20, 2);
  fs::remove(d20 + "/manifest.json");
  update_latest_atomic(tmp.str(), "step_00000010");
  const auto found = find_latest(tmp.str(), options());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 10);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step_00000020"), std::string::npos) << warnings[0];
  EXPECT_EQ(warnings[0].find("step_00000005"), std::string::npos) << "older: not worth a warning";
}

// Rewrites the step's manifest.json with `edit` applied to its JSON (the checksum kept as it was).
void edit_manifest(const std::string& step_dir, const std::function<void(json&)>& edit) {
  const std::string path = step_dir + "/manifest.json";
  json j = json::parse(read_text_file(path));
  edit(j);
  write_file_atomic(path, j.dump(1));
}

// Everything a resume reads from the manifest is covered by its checksum: an edited value is a
// fault for verify and a reason for find_latest to fall back, never silently used.
TEST_F(FindLatest, EditedManifestIsRefused) {
  const std::vector<std::pair<std::string, std::function<void(json&)>>> edits = {
      {"optimizer_updates", [](json& j) { j["state"]["optimizer_updates"] = 99; }},
      {"sampler position", [](json& j) { j["state"]["sampler"]["position"] = 7; }},
      {"loss scale", [](json& j) { j["state"]["loss_scaler"]["cur_scale"] = 2.0; }},
      {"config", [](json& j) { j["config"]["strata"]["model"]["n_head"] = 2; }},
      {"zero stage", [](json& j) { j["zero_stage"] = 2; }},
      {"slice checksum",
       [](json& j) { j["params"][0]["slices"][0]["checksum"] = "crc32:00000000"; }},
  };
  for (const auto& [what, edit] : edits) {
    TempDir tmp;
    testing::save_toy(tmp.str(), 10, 2);
    const std::string d20 = testing::save_toy(tmp.str(), 20, 2);
    edit_manifest(d20, edit);
    const VerifyReport rep = verify_checkpoint(d20);
    ASSERT_FALSE(rep.ok()) << what << " edited, and verify says ok";
    EXPECT_NE(rep.faults[0].find("manifest.json: checksum mismatch"), std::string::npos)
        << what << ": " << rep.faults[0];
    EXPECT_TRUE(throws_with<CheckpointError>([&] { CheckpointReader r(d20); },
                                             {"checksum mismatch", "changed after it was written"}))
        << what;
    warnings.clear();
    EXPECT_EQ(find_latest(tmp.str(), options())->step, 10) << what;
  }
  // Formatting alone (whitespace, key order) is not a change.
  TempDir tmp;
  const std::string d = testing::save_toy(tmp.str(), 10, 1);
  write_file_atomic(d + "/manifest.json",
                    json::parse(read_text_file(d + "/manifest.json")).dump(4));
  EXPECT_TRUE(verify_checkpoint(d).ok());
}

TEST(Integrity, ManifestChecksumIsRequiredFromFormat2AndOlderManifestsStillRead) {
  TempDir tmp;
  const std::string d = testing::save_toy(tmp.str(), 10, 1);
  json j = json::parse(read_text_file(d + "/manifest.json"));
  EXPECT_EQ(j["format_version"], 2);
  j.erase("checksum");
  write_file_atomic(d + "/manifest.json", j.dump());
  EXPECT_TRUE(throws_with<CheckpointError>([&] { read_manifest(d); }, {"no checksum"}));
  // A format-1 manifest (written before checksums): read as it is.
  j["format_version"] = 1;
  write_file_atomic(d + "/manifest.json", j.dump());
  EXPECT_EQ(read_manifest(d).step, 10);
  EXPECT_TRUE(verify_checkpoint(d, VerifyLevel::full).ok());
}

// HDF5's own bytes (metadata) are checked against the manifest before HDF5 parses the file: a
// damaged superblock or attribute is a named fault, never a crash inside HDF5.
TEST(Integrity, DamagedHdf5MetadataIsRefusedBeforeHdf5ReadsIt) {
  TempDir tmp;
  const std::string d = testing::save_toy(tmp.str(), 10, 2);
  const Manifest m = read_manifest(d);
  ASSERT_TRUE(m.files[1].hdf5_checksum);
  ASSERT_FALSE(m.files[1].hdf5_extents.empty());
  const auto [off, len] = m.files[1].hdf5_extents.front();
  testing::flip_byte(d + "/rank_00001.h5", off + len / 2);
  const VerifyReport rep = verify_checkpoint(d);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.faults[0].find("rank_00001.h5: HDF5's bytes (metadata) do not match the manifest"),
            std::string::npos)
      << rep.faults[0];
  CheckpointReader r(d);
  EXPECT_TRUE(throws_with<CheckpointError>([&] { r.read_f32("param", "transformer.ln_f.weight"); },
                                           {"rank_00001.h5", "HDF5's bytes"}));
}

// Two processes (two jobs sharing a log folder) writing the same file at once: each write is
// whole, neither fails on the other's temporary file, and none is left behind.
TEST(DurableFs, ConcurrentAtomicWritesOfOneFileFromTwoProcesses) {
  TempDir tmp;
  const std::string path = tmp / "resolved_config.json";
  const std::string a(64 * 1024, 'a'), b(64 * 1024, 'b');
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int rc = 0;
    try {
      for (int i = 0; i < 200; ++i) write_file_atomic(path, b);
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  bool ok = true;
  try {
    for (int i = 0; i < 200; ++i) write_file_atomic(path, a);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    ok = false;
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(ok);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the other writer failed";
  std::stringstream got;
  got << std::ifstream(path).rdbuf();
  EXPECT_TRUE(got.str() == a || got.str() == b);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.str())) (void)e, ++files;
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace strata::checkpoint
