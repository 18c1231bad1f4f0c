// Resume faults: a corrupt byte in one rank file of the newest checkpoint makes "auto" fall back
// to the previous checkpoint with a warning (and an explicit path to it fail on every rank); a
// checkpoint of another model is refused with every difference listed; "none" starts fresh.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <fcntl.h>
#include <unistd.h>
#include <fstream>
#include <thread>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/naming.hpp"
#include "tests/dist/engine/test_resume_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {

// Flips one byte of the data of the first `param` dataset in rank file `rank` of step_dir.
void corrupt_one_byte(const std::string& step_dir, int rank) {
  const checkpoint::Manifest m = checkpoint::read_manifest(step_dir);
  const std::string file = checkpoint::rank_file_name(rank);
  std::string dataset;
  for (const auto& p : m.params)
    for (const auto& s : p.slices)
      if (dataset.empty() && s.file == file && s.kind == "param") dataset = s.dataset;
  ASSERT_FALSE(dataset.empty());
  const std::string path = step_dir + "/" + file;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  ASSERT_NE(offset, HADDR_UNDEF);
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset) + 2), 1);
  b ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset) + 2), 1);
  ::close(fd);
}

JobSpec small_spec(const parallel::Group& w, const SharedTempDir& tmp, int stage) {
  JobSpec s;
  s.tokens = write_tokens(w, tmp.sub("t.tok"), 64, 801);
  s.stage = stage;
  s.ckpt.root = tmp.sub("ck");
  return s;
}

TEST(ResumeFaults, CorruptNewestCheckpointFallsBackToPrevious) {
  const SingleThreaded one_thread;
  const auto& w = world();
  SharedTempDir tmp(w, "corrupt");
  const JobSpec spec = small_spec(w, tmp, 2);
  std::vector<float> at2;
  {
    Job a(w, spec);
    a.train_step();
    a.train_step();
    a.save();
    at2 = a.gather(0);
    a.train_step();
    a.train_step();
    a.save();
  }
  const std::string newest = tmp.sub("ck") + "/" + checkpoint::step_dir_name(4);
  if (w.rank() == 0) corrupt_one_byte(newest, w.size() - 1);  // the last rank's file
  w.barrier().wait();

  {
    Job none(w, spec);
    EXPECT_FALSE(none.resume("none"));
    EXPECT_EQ(none.step, 0);
  }
  std::vector<std::string> warnings;
  Job b(w, spec);
  b.scramble();
  ASSERT_TRUE(b.resume("auto", [&](const std::string& m) { warnings.push_back(m); }));
  EXPECT_EQ(b.step, 2);
  EXPECT_TRUE(b.gather(0) == at2) << "the fallback did not load step 2's masters";
  if (w.rank() == 0) {
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("step_00000004 could not be loaded, falling back"),
              std::string::npos)
        << warnings[0];
    EXPECT_NE(warnings[0].find("checksum mismatch"), std::string::npos) << warnings[0];
  } else {
    EXPECT_TRUE(warnings.empty());
  }

  // Named explicitly, the corrupt checkpoint is an error on every rank, not a fallback.
  Job c(w, spec);
  try {
    c.resume(newest);
    ADD_FAILURE() << "loading a corrupt checkpoint did not throw";
  } catch (const checkpoint::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
}

TEST(ResumeFaults, IncompatibleModelListsEveryDifference) {
  const SingleThreaded one_thread;
  const auto& w = world();
  SharedTempDir tmp(w, "incompatible");
  JobSpec spec = small_spec(w, tmp, 1);
  {
    Job a(w, spec);
    a.train_step();
    a.save();
  }
  spec.model.n_layer = 3;      // a block more: 12 parameters missing
  spec.model.vocab_size = 80;  // and a larger embedding
  Job b(w, spec);
  try {
    b.resume("auto");
    ADD_FAILURE() << "a checkpoint of another model was loaded";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("does not match the model (13 differences)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing from the checkpoint: transformer.h.2.attn.c_attn.weight"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("shape of transformer.wte.weight: checkpoint [64, 32], model [80, 32]"),
              std::string::npos)
        << msg;
  }
}

TEST(ResumeFaults, FailedSaveThrowsOnEveryRank) {
  const SingleThreaded one_thread;
  const auto& w = world();
  SharedTempDir tmp(w, "failed_save");
  JobSpec spec = small_spec(w, tmp, 1);
  spec.ckpt.root = tmp.sub("a_file");  // a regular file: rank 0 cannot make the step directory
  if (w.rank() == 0) std::ofstream(spec.ckpt.root) << "not a directory\n";
  w.barrier().wait();
  {
    Job a(w, spec);
    a.train_step();
    EXPECT_THROW(a.save(), Error);
  }
  spec.ckpt.async = true;
  Job b(w, spec);
  b.train_step();
  b.save();        // returns once staged
  b.train_step();  // training goes on while the background save fails
  bool failed = false;
  for (int i = 0; i < 60000 && !failed; ++i) {
    failed = b.ck->background_failed();
    if (!failed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(failed) << "the background failure never surfaced on this rank";
  try {
    b.ck->finish();
    ADD_FAILURE() << "finish() after a failed background save did not throw";
  } catch (const Error& e) {
    if (w.rank() == 0) {
      EXPECT_NE(std::string(e.what()).find("a_file"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
