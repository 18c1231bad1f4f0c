// Asynchronous saves: the job owns host staging copies (charged to the ledger, released after
// the write), at most one save is in flight, and a background failure surfaces at the next
// poll(), at wait(), or — if nobody asked — through the destructor's sink; it is never lost.
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <gtest/gtest.h>

#include <sched.h>

#include <filesystem>
#include <fstream>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/async_saver.hpp"
#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/raw_io.hpp"
#include "framework/checkpoint/reader.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;

SaveJob make_job(const std::string& root, std::int64_t step, std::vector<float>& values,
                 MemoryLedger& ledger) {
  SaveJob job;
  job.spec.root = root;
  job.spec.header.step = step;
  job.slices.push_back(
      stage(SliceRef{"param", "w", Shape{2, 4}, DType::f32, 0, 8, values.data()}, ledger));
  job.rank_state.rngs["sample"] = RngRecord{7, static_cast<std::uint64_t>(step)};
  return job;
}

TEST(AsyncSaver, WritesStagedCopiesWhileTheOriginalChanges) {
  TempDir tmp;
  MemoryLedger ledger;
  std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8};
  {
    AsyncSaver saver(single_process_ok);
    SaveJob job = make_job(tmp.str(), 1, w, ledger);
    EXPECT_EQ(ledger.current(Tier::host, Category::other), 32u);
    saver.submit(std::move(job));
    std::fill(w.begin(), w.end(), -1.0f);  // training goes on
    saver.wait();
    EXPECT_FALSE(saver.in_flight());
    ASSERT_TRUE(saver.last_result());
    EXPECT_TRUE(saver.last_result()->committed);
  }
  EXPECT_EQ(ledger.current(Tier::host, Category::other), 0u);  // staging released
  EXPECT_EQ(ledger.peak(Tier::host, Category::other), 32u);
  CheckpointReader r(find_latest(tmp.str())->dir);
  EXPECT_EQ(r.read_f32("param", "w"), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(r.rank_state(0).rngs.at("sample").counter, 1u);
}

TEST(AsyncSaver, OneInFlightAndSuccessiveSavesAllCommit) {
  TempDir tmp;
  MemoryLedger ledger;
  std::vector<float> w(8, 0.5f);
  AsyncSaver saver(single_process_ok);
  for (std::int64_t s = 1; s <= 4; ++s) {
    saver.poll();
    saver.submit(make_job(tmp.str(), s, w, ledger));  // waits for the previous one
  }
  saver.wait();
  EXPECT_EQ(list_complete_checkpoints(tmp.str()).size(), 4u);
  EXPECT_EQ(find_latest(tmp.str())->step, 4);
}

TEST(AsyncSaver, BackgroundErrorSurfacesAtNextPoll) {
  TempDir tmp;
  MemoryLedger ledger;
  std::vector<float> w(8, 0.5f);
  { std::ofstream(tmp / "not-a-dir") << "x"; }  // the checkpoint root is a file: the save must fail
  AsyncSaver saver(single_process_ok);
  saver.submit(make_job(tmp / "not-a-dir", 1, w, ledger));
  // Poll until the background save has finished; its error comes out exactly once.
  bool thrown = false;
  for (int i = 0; i < 100000 && !thrown; ++i) {
    try {
      saver.poll();
    } catch (const Error& e) {
      thrown = true;
      EXPECT_NE(std::string(e.what()).find("not-a-dir"), std::string::npos) << e.what();
    }
    if (saver.in_flight()) std::this_thread::yield();
  }
  EXPECT_TRUE(thrown);
  EXPECT_NO_THROW(saver.poll());
  EXPECT_NO_THROW(saver.wait());
  EXPECT_EQ(ledger.current(Tier::host, Category::other), 0u);
}

TEST(AsyncSaver, ErrorSurfacesAtSubmitAndWait) {
  TempDir tmp;
  MemoryLedger ledger;
  std::vector<float> w(8, 0.5f);
  { std::ofstream(tmp / "file") << "x"; }
  AsyncSaver saver(single_process_ok);
  saver.submit(make_job(tmp / "file", 1, w, ledger));
  EXPECT_THROW(saver.submit(make_job(tmp / "ok", 2, w, ledger)), Error);  // previous failure first
  saver.submit(make_job(tmp / "file", 3, w, ledger));
  EXPECT_THROW(saver.wait(), Error);
}

TEST(AsyncSaver, UncollectedErrorReachesTheSinkAtDestruction) {
  TempDir tmp;
  MemoryLedger ledger;
  std::vector<float> w(8, 0.5f);
  { std::ofstream(tmp / "file") << "x"; }
  std::vector<std::string> reported;
  {
    AsyncSaver saver(single_process_ok, [&](const std::string& m) { reported.push_back(m); });
    saver.submit(make_job(tmp / "file", 1, w, ledger));
  }
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_NE(reported[0].find("background checkpoint save failed"), std::string::npos);
}

TEST(Staging, TensorSourceIsCopiedToHost) {
  MemoryLedger ledger;
  TensorOptions o;
  o.tier = Tier::device;
  o.category = Category::params;
  o.ledger = &ledger;
  Tensor t = Tensor::empty(Shape{2, 3}, DType::f32, o);
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = static_cast<float>(i);
  StagedSlice s = stage("param", "x", Shape{10}, 4, t.slice(1, 0, 3), ledger);
  EXPECT_EQ(s.begin, 4);
  EXPECT_EQ(s.end, 10);
  EXPECT_EQ(s.data.tier(), Tier::host);
  EXPECT_EQ(s.data.category(), Category::other);
  t.fill(9.0);
  EXPECT_EQ(s.data.to_vector(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW(stage("param", "x", Shape{5}, 4, t, ledger), Error);  // 4 + 6 > 5
  // Staging checksums what it copies.
  EXPECT_EQ(s.checksum, crc32(s.data.raw(), s.data.nbytes()));
  EXPECT_EQ(*s.ref().checksum, s.checksum);
}

TEST(Staging, ArenaPlacesSlicesBackToBackFromAnAlignedStart) {
  MemoryLedger ledger;
  std::vector<float> a(1000, 1.0f), b(3, 2.0f);
  std::vector<std::uint16_t> h(5, 7);
  StagingArena arena(1000 * 4 + 3 * 4 + 4, ledger);
  EXPECT_EQ(ledger.current(Tier::host, Category::other), arena.capacity() + kDirectIoAlign);
  StagedSlice sa = arena.stage(SliceRef{"param", "a", Shape{1000}, DType::f32, 0, 1000, a.data()});
  StagedSlice sb = arena.stage(SliceRef{"param", "b", Shape{3}, DType::f32, 0, 3, b.data()});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(sa.data.raw()) % kDirectIoAlign, 0u);
  EXPECT_EQ(static_cast<const char*>(sb.data.raw()),
            static_cast<const char*>(sa.data.raw()) + 4000);
  EXPECT_EQ(sb.data.to_vector(), b);
  EXPECT_EQ(sa.checksum, crc32(a.data(), 4000));
  // No room left: a buffer of its own (still correct, still checksummed).
  StagedSlice sc = arena.stage(SliceRef{"param", "c", Shape{5}, DType::bf16, 0, 5, h.data()});
  EXPECT_NE(sc.data.storage(), sa.data.storage());
  EXPECT_EQ(sc.checksum, crc32(h.data(), 10));
}

TEST(AsyncSaver, WriterRunsAtLowPriorityUnlessAskedOtherwise) {
  TempDir tmp;
  MemoryLedger ledger;
  std::vector<float> w(8, 0.5f);
  int policy = -1, nice_value = -100;
  auto probe = [&](bool ok) {  // runs on the writer's thread
    policy = sched_getscheduler(0);
    errno = 0;
    nice_value = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
    return ok;
  };
  {
    AsyncSaver saver(probe);  // default: nice 19
    saver.submit(make_job(tmp.str(), 1, w, ledger));
    saver.wait();
  }
  EXPECT_EQ(policy, SCHED_OTHER);
  EXPECT_EQ(nice_value, 19);
  {
    AsyncSaver saver(probe, warn_to_stderr, WriterPriority::idle);
    saver.submit(make_job(tmp.str(), 4, w, ledger));
    saver.wait();
  }
  EXPECT_EQ(policy, SCHED_IDLE);
  {
    AsyncSaver saver(probe, warn_to_stderr, WriterPriority::normal);
    saver.submit(make_job(tmp.str(), 2, w, ledger));
    saver.wait();
  }
  EXPECT_EQ(policy, SCHED_OTHER);
  ::setenv("STRATA_CHECKPOINT_WRITER_PRIORITY", "fastest", 1);
  EXPECT_THROW(AsyncSaver{single_process_ok}, UserError);
  ::setenv("STRATA_CHECKPOINT_WRITER_PRIORITY", "normal", 1);
  {
    AsyncSaver saver(probe);  // the variable overrides the default
    saver.submit(make_job(tmp.str(), 3, w, ledger));
    saver.wait();
  }
  ::unsetenv("STRATA_CHECKPOINT_WRITER_PRIORITY");
  EXPECT_EQ(policy, SCHED_OTHER);
}

}  // namespace
}  // namespace strata::checkpoint
