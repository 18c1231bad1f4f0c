// A full disk while writing a checkpoint: one NoSpaceError naming the directory and the bytes
// needed, the temporary file removed, and no HDF5 file left half-closed (HDF5 1.10 frees a file
// whose close failed but keeps its ID, and crashes closing it again at exit). The file system is
// a small tmpfs this test mounts; without permission to mount, the tests are skipped.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <vector>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/consolidated.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/h5_io.hpp"
#include "framework/checkpoint/shard_writer.hpp"
#include "framework/checkpoint/space.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;
using testing::throws_with;
namespace fs = std::filesystem;

// A tmpfs of `size` (e.g. "64k") mounted on a temporary directory for the test's lifetime.
class SmallFs {
 public:
  explicit SmallFs(const std::string& size) {
    const std::string opts = "size=" + size;
    if (::mount("tmpfs", dir_.str().c_str(), "tmpfs", 0, opts.c_str()) == 0)
      mounted_ = true;
    else
      why_not_ = std::strerror(errno);
  }
  ~SmallFs() {
    if (mounted_) ::umount2(dir_.str().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why_not() const { return why_not_; }
  std::string operator/(const std::string& name) const { return dir_ / name; }
  std::string str() const { return dir_.str(); }

 private:
  TempDir dir_;
  bool mounted_ = false;
  std::string why_not_;
};

#define MOUNT_OR_SKIP(fs)                                               \
  if (!(fs).mounted())                                                  \
  GTEST_SKIP() << "cannot mount a small tmpfs here (" << (fs).why_not() \
               << "): the full-disk tests need root and permission to mount"

// Fills the file system holding `dir` until a write fails for lack of space.
void fill(const std::string& dir) {
  std::FILE* f = std::fopen((dir + "/filler").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::setvbuf(f, nullptr, _IONBF, 0);
  const std::vector<char> block(4096, 'x');
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
  }
  std::vector<char> tail(512, 'y');  // the last partial page
  while (std::fwrite(tail.data(), 1, 1, f) == 1) {
  }
  std::fclose(f);
}

// Runs f in a child process that ends through exit() — HDF5's shutdown then closes whatever
// files are left, and crashes on a half-closed one — and returns its wait status. f returns the
// exit status (0: as expected) and explains any other on stderr.
int in_child(const std::function<int()>& f) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = f();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    }
    std::exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

#define EXPECT_CLEAN_EXIT(status)                                                      \
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)                           \
      << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) \
                              : "exit status " + std::to_string(WEXITSTATUS(status)))

TEST(FullDisk, DataThatDoesNotFitIsOneLineNamingTheDirectoryAndTheBytes) {
  SmallFs small("64k");
  MOUNT_OR_SKIP(small);
  const std::string dir = small / "step_00000001";
  const int status = in_child([&] {
    std::vector<float> data(64 * 1024, 1.5f);  // 256 KiB
    {
      ShardWriter w(dir, 0, 1, 1);
      try {
        w.add(SliceRef{"param", "w", Shape{64 * 1024}, DType::f32, 0, 64 * 1024, data.data()});
        w.commit();  // the data may be written by then only
        std::fprintf(stderr, "256 KiB were written to a 64 KiB file system\n");
        return 1;
      } catch (const NoSpaceError& e) {
        const std::string msg = e.what();
        if (msg.find("no space left on the file system of '" + dir + "'") == std::string::npos ||
            msg.find("'rank_00000.h5': it needs at least 2") == std::string::npos ||
            msg.find('\n') != std::string::npos) {
          std::fprintf(stderr, "message: %s\n", msg.c_str());
          return 2;
        }
      }
    }
    if (fs::exists(dir + "/rank_00000.h5.tmp")) return 3;  // the space must be given back
    return 0;
  });
  EXPECT_CLEAN_EXIT(status);

  // Said up front (expect), it fails before anything is written, naming the whole need.
  ShardWriter w(dir, 0, 1, 1);
  EXPECT_TRUE(throws_with<NoSpaceError>([&] { w.expect(256 * 1024, 1); },
                                        {"no space left", "it needs 266.00 KiB", "are free"}));
}

TEST(FullDisk, FailedFlushAtCommitLeavesNoHalfClosedFile) {
  SmallFs small("128k");
  MOUNT_OR_SKIP(small);
  const std::string dir = small / "step_00000002";
  std::vector<float> data(1024, 2.5f);
  const int status = in_child([&] {
    ShardWriter w(dir, 0, 1, 2);
    w.add(SliceRef{"param", "w", Shape{1024}, DType::f32, 0, 1024, data.data()});
    fill(small.str());  // HDF5's metadata, written at close, no longer fits
    try {
      w.commit();
      return 1;
    } catch (const NoSpaceError& e) {
      return std::string(e.what()).find("no space left on the file system of '" + dir) ==
                     std::string::npos
                 ? 2
                 : 0;
    }
  });
  EXPECT_CLEAN_EXIT(status);
  EXPECT_FALSE(fs::exists(dir + "/rank_00000.h5.tmp"));
  EXPECT_FALSE(fs::exists(dir + "/rank_00000.h5"));
  fs::remove(small / "filler");
  // And in this process, HDF5 works on after such a failure: the same file written again.
  {
    ShardWriter w(dir, 0, 1, 2);
    w.add(SliceRef{"param", "w", Shape{1024}, DType::f32, 0, 1024, data.data()});
    fill(small.str());
    EXPECT_THROW(w.commit(), NoSpaceError);
  }
  fs::remove(small / "filler");
  ShardWriter w(dir, 0, 1, 2);
  w.add(SliceRef{"param", "w", Shape{1024}, DType::f32, 0, 1024, data.data()});
  EXPECT_NO_THROW(w.commit());
}

TEST(FullDisk, FileDroppedOnAFullDiskLeavesNoHalfClosedFile) {
  SmallFs small("128k");
  MOUNT_OR_SKIP(small);
  const std::string dir = small / "step_00000003";
  const int status = in_child([&] {
    std::vector<float> data(1024, 3.5f);
    {
      ShardWriter w(dir, 0, 1, 3);
      w.add(SliceRef{"param", "w", Shape{1024}, DType::f32, 0, 1024, data.data()});
      fill(small.str());
      try {  // the save fails for another reason (e.g. another rank's failure) on a full disk
        w.add(SliceRef{"param", "w", Shape{1024}, DType::f32, 0, 2048, data.data()});
        return 1;
      } catch (const Error&) {
      }
    }  // dropped: closing it must not need the disk
    return fs::exists(dir + "/rank_00000.h5.tmp") ? 2 : 0;
  });
  EXPECT_CLEAN_EXIT(status);
}

TEST(FullDisk, ExportToAFullDiskIsOneLineAndNoCrash) {
  TempDir tmp;
  const std::string d = testing::save_toy(tmp.str(), 3, 2);
  SmallFs small("2m");
  MOUNT_OR_SKIP(small);
  // Refused up front (too little room), and when the room goes while writing.
  EXPECT_TRUE(throws_with<NoSpaceError>(
      [&] {
        fill(small.str());
        export_consolidated(d, small / "a.h5");
      },
      {"no space left on the file system of", "'a.h5'"}));
  fs::remove(small / "filler");
  EXPECT_FALSE(fs::exists(small / "a.h5.tmp"));
}

// A file HDF5 writes itself (an export) on a disk that fills before it is closed: the close
// reserves the file's blocks first and, finding no room, closes it in memory and reports it.
TEST(FullDisk, Hdf5FileClosedOnAFullDiskIsReportedNotCrashed) {
  SmallFs small("2m");
  MOUNT_OR_SKIP(small);
  const int status = in_child([&] {
    const std::vector<float> data(16, 1.0f);
    h5::Id file = h5::create_file(small / "c.h5");
    for (int i = 0; i < 50; ++i) {  // metadata that needs pages of its own at the close
      h5::Id ds =
          h5::write_dataset(file.get(), "/w" + std::to_string(i), DType::f32, {16}, data.data());
      ds.close("dataset");
    }
    fill(small.str());
    try {
      file.close("c.h5");
      return 1;
    } catch (const NoSpaceError& e) {
      return std::string(e.what()).find("No space left on device") == std::string::npos ? 2 : 0;
    }
  });
  EXPECT_CLEAN_EXIT(status);
}

TEST(FullDisk, ManifestOrLatestThatDoesNotFitIsNamedAndLeavesNoTemporary) {
  SmallFs small("64k");
  MOUNT_OR_SKIP(small);
  fill(small.str());
  EXPECT_TRUE(throws_with<NoSpaceError>(
      [&] { write_file_atomic(small / "manifest.json", std::string(10000, ' ')); },
      {"no space left on the file system of '" + small.str() + "' for 'manifest.json'",
       "(10000 bytes)"}));
  EXPECT_FALSE(fs::exists(small / "manifest.json.tmp"));
  EXPECT_FALSE(fs::exists(small / "manifest.json"));
}

}  // namespace
}  // namespace strata::checkpoint
