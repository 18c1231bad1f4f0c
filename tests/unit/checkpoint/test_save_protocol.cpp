// The commit protocol with several ranks (threads standing in for processes, the AllRanksOk
// callback an AND over a barrier): a failure on any rank means no manifest and no `latest` move,
// reported on every rank; success commits once, on rank 0.
#include <gtest/gtest.h>

#include <barrier>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/latest.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/shard_file.hpp"
#include "framework/checkpoint/shard_writer.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

// An all-reduce(AND) over `world` threads.
class AndReduce {
 public:
  explicit AndReduce(int world) : barrier_(world), world_(world) {}
  bool operator()(bool ok) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!ok) failed_ = true;
    }
    barrier_.arrive_and_wait();
    bool result;
    {
      std::lock_guard<std::mutex> l(mu_);
      result = !failed_;
    }
    barrier_.arrive_and_wait();  // everyone has read the result
    if (++left_ % world_ == 0) {
      std::lock_guard<std::mutex> l(mu_);
      failed_ = false;  // reset for the next call
    }
    barrier_.arrive_and_wait();
    return result;
  }

 private:
  std::barrier<> barrier_;
  int world_;
  std::mutex mu_;
  bool failed_ = false;
  std::atomic<int> left_{0};
};

// Runs a save of `world` ranks in threads; rank `bad` (if >= 0) is given an invalid slice.
std::vector<std::string> run_ranks(const std::string& root, std::int64_t step, int world, int bad) {
  AndReduce reduce(world);
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<float> data(12);
  for (int i = 0; i < 12; ++i) data[i] = static_cast<float>(i + step);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      SaveSpec spec;
      spec.root = root;
      spec.rank = r;
      spec.header.step = step;
      spec.header.layout = WorldLayout{world, world, 1, 1};
      const std::int64_t per = 12 / world;
      std::vector<SliceRef> slices = {SliceRef{"param", "w", Shape{3, 4}, DType::f32, r * per,
                                               (r + 1) * per, data.data() + r * per}};
      if (r == bad) slices[0].end = 13;  // outside the parameter: this rank fails to write
      try {
        save_checkpoint(spec, slices, RankState{}, [&](bool ok) { return reduce(ok); });
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

TEST(SaveProtocol, AllRanksSucceedThenRankZeroCommits) {
  TempDir tmp;
  const auto errors = run_ranks(tmp.str(), 3, 3, -1);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(read_latest(tmp.str()), "step_00000003");
  CheckpointReader r(tmp / "step_00000003");
  EXPECT_EQ(r.manifest().layout.world, 3);
  EXPECT_EQ(r.read_f32("param", "w")[11], 14.0f);
}

TEST(SaveProtocol, OneFailingRankMeansNoCommitAnywhere) {
  TempDir tmp;
  run_ranks(tmp.str(), 1, 3, -1);
  const auto errors = run_ranks(tmp.str(), 2, 3, 1);
  EXPECT_NE(errors[1].find("outside"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("another rank failed"), std::string::npos) << errors[0];
  EXPECT_NE(errors[2].find("another rank failed"), std::string::npos) << errors[2];
  EXPECT_FALSE(fs::exists(tmp / "step_00000002/manifest.json"));
  EXPECT_FALSE(fs::exists(tmp / "step_00000002/rank_00001.h5"));
  EXPECT_FALSE(fs::exists(tmp / "step_00000002/rank_00001.h5.tmp"));
  EXPECT_EQ(read_latest(tmp.str()), "step_00000001");
  EXPECT_EQ(find_latest(tmp.str())->step, 1);
}

TEST(SaveProtocol, ResavingAStepReplacesItCompletely) {
  TempDir tmp;
  run_ranks(tmp.str(), 4, 2, -1);
  run_ranks(tmp.str(), 4, 2, -1);
  EXPECT_TRUE(verify_checkpoint(tmp / "step_00000004").ok());
  // A failed re-save leaves no manifest: the step is no longer a checkpoint.
  run_ranks(tmp.str(), 4, 2, 0);
  EXPECT_FALSE(fs::exists(tmp / "step_00000004/manifest.json"));
}

// A save killed after writing its manifest's temporary (or a rank file's) and then done again by
// the restarted job leaves no temporary in the step directory (found by the chaos soak, seed 765:
// "step_00000021/manifest.json.tmp.6793" was left after a kill at manifest_tmp and a re-save).
TEST(SaveProtocol, ResavingAStepRemovesTheTemporariesOfAKilledSave) {
  TempDir tmp;
  const fs::path dir = tmp / "step_00000004";
  fs::create_directories(dir);
  for (const char* f : {"manifest.json.tmp.6793", "rank_00001.h5.tmp", "notes.txt", "x.tmp.12a"})
    std::ofstream(dir / f) << "x";
  const auto errors = run_ranks(tmp.str(), 4, 2, -1);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_TRUE(verify_checkpoint(dir.string()).ok());
  EXPECT_FALSE(fs::exists(dir / "manifest.json.tmp.6793"));
  EXPECT_FALSE(fs::exists(dir / "rank_00001.h5.tmp"));
  // Only the temporaries: what is not one stays.
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  EXPECT_TRUE(fs::exists(dir / "x.tmp.12a"));
}

// Rank 0 builds the manifest from the records the ranks send (gathered), not by re-reading their
// files: the same manifest, and a record that disagrees with the file on disk is refused.
TEST(SaveProtocol, ManifestFromGatheredRecordsEqualsTheOneFromTheFiles) {
  TempDir tmp;
  ManifestHeader h;
  h.step = 7;
  h.layout = WorldLayout{2, 2, 1, 1};
  const std::string dir = tmp / "step_00000007";
  std::vector<float> data(40);
  for (int i = 0; i < 40; ++i) data[static_cast<std::size_t>(i)] = static_cast<float>(i) * 0.5f;
  std::vector<ShardRecord> records;
  for (int r = 0; r < 2; ++r) {
    ShardWriter w(dir, r, 2, 7);
    w.add(SliceRef{"param", "w", Shape{40}, DType::f32, r * 20, r * 20 + 20, data.data() + r * 20});
    w.add(SliceRef{"exp_avg", "w", Shape{40}, DType::f32, r * 20, r * 20 + 20, data.data()});
    records.push_back(w.commit());
  }
  // Through JSON, as they travel.
  std::vector<std::string> texts;
  for (const auto& r : records) texts.push_back(record_to_json(r).dump());
  const std::vector<ShardRecord> sent = parse_records(texts);
  json from_files = to_json(
      build_manifest(h, {scan_shard(dir, rank_file_name(0)), scan_shard(dir, rank_file_name(1))}));
  json committed = to_json(commit_checkpoint(tmp.str(), h, sent));
  from_files.erase("created");
  committed.erase("created");
  // HDF5's bytes: the writer knows exactly where they are, a scan takes all but the datasets;
  // both are checksummed.
  for (json* m : {&from_files, &committed})
    for (auto& f : (*m)["files"]) {
      EXPECT_TRUE(f.contains("hdf5_bytes")) << f.dump();
      f.erase("hdf5_bytes");
    }
  EXPECT_EQ(committed, from_files);
  EXPECT_TRUE(verify_checkpoint(dir, VerifyLevel::full).ok());
  EXPECT_EQ(read_latest(tmp.str()), "step_00000007");

  std::vector<ShardRecord> wrong = sent;
  wrong[1].bytes += 1;
  try {
    commit_checkpoint(tmp.str(), h, wrong);
    FAIL() << "a record with the wrong size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank_00001.h5"), std::string::npos) << e.what();
  }
  wrong = sent;
  wrong[0].file = "rank_00001.h5";
  EXPECT_THROW(commit_checkpoint(tmp.str(), h, wrong), Error);
  json bad = record_to_json(records[0]);
  bad["extra"] = 1;
  EXPECT_THROW(record_from_json(bad), Error);
  EXPECT_THROW(parse_records({"not json"}), Error);
}

// save_checkpoint with a GatherToRoot: every rank's record reaches rank 0, which commits.
TEST(SaveProtocol, SaveWithGatheredRecordsCommits) {
  TempDir tmp;
  const int world = 3;
  AndReduce reduce(world);
  std::barrier<> sync(world);
  std::vector<std::string> slots(world);
  auto gather = [&](int rank) {
    return [&, rank](const std::string& mine) {
      slots[static_cast<std::size_t>(rank)] = mine;
      sync.arrive_and_wait();
      std::vector<std::string> out;
      if (rank == 0) out = slots;
      sync.arrive_and_wait();
      return out;
    };
  };
  std::vector<float> data(12, 2.5f);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      SaveSpec spec;
      spec.root = tmp.str();
      spec.rank = r;
      spec.header.step = 5;
      spec.header.layout = WorldLayout{world, world, 1, 1};
      std::vector<SliceRef> slices = {
          SliceRef{"param", "w", Shape{12}, DType::f32, r * 4, r * 4 + 4, data.data()}};
      try {
        save_checkpoint(
            spec, slices, RankState{}, [&](bool ok) { return reduce(ok); }, gather(r));
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_TRUE(verify_checkpoint(tmp / "step_00000005", VerifyLevel::full).ok());
  EXPECT_EQ(CheckpointReader(tmp / "step_00000005").read_f32("param", "w"),
            std::vector<float>(12, 2.5f));
}

}  // namespace
}  // namespace strata::checkpoint
