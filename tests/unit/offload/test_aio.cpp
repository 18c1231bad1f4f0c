// AioQueue: io_uring reads and writes round-trip through an O_DIRECT swap file in block-sized
// requests; dependencies order jobs; injected errors fail the job (and its dependents) with a
// message naming the file, raised where the job is waited on.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "framework/core/error.hpp"
#include "offload/aio.hpp"
#include "offload/host_buffer.hpp"
#include "offload/swap_file.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

namespace strata::offload {
namespace {

using test::ScratchDir;

TEST(AioQueue, WritesAndReadsBackThroughTheSwapFileInBlocks) {
  ScratchDir dir("aio");
  MemoryLedger ledger;
  SwapFile f(dir.str(), 0, "t", Category::other, ledger);
  const std::uint64_t bytes = 5 * 8192 + 4096;  // not a multiple of the block size
  const auto off = f.grow(bytes);
  EXPECT_EQ(ledger.current(Tier::nvme, Category::other), bytes);
  for (int qd : {1, 3}) {
    for (bool single : {false, true}) {
      AioOptions o;
      o.block_size = 8192;
      o.queue_depth = qd;
      o.single_submit = single;
      o.overlap_events = qd == 1;
      o.thread_count = single ? 2 : 1;
      AioQueue q(o);
      HostBuffer a(bytes, Category::other, false, ledger), b(bytes, Category::other, false, ledger);
      for (std::uint64_t i = 0; i < bytes; ++i) a.data()[i] = static_cast<std::byte>((i * 7 + qd) & 0xff);
      std::memset(b.data(), 0, bytes);
      const auto w = q.submit(IoOp::write, f.fd(), f.path(), a.data(), bytes, off);
      const auto r = q.submit(IoOp::read, f.fd(), f.path(), b.data(), bytes, off, {w});
      q.wait(r);
      EXPECT_TRUE(q.done(w));
      EXPECT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << "qd " << qd << " single " << single;
    }
  }
}

TEST(AioQueue, FreshSwapSpaceReadsAsZeros) {
  ScratchDir dir("aio0");
  MemoryLedger ledger;
  SwapFile f(dir.str(), 0, "t", Category::other, ledger);
  const auto off = f.grow(3 * 4096);
  AioQueue q(AioOptions{});
  HostBuffer b(3 * 4096, Category::other, false, ledger);
  std::memset(b.data(), 0x5a, b.size());
  q.wait(q.submit(IoOp::read, f.fd(), f.path(), b.data(), 3 * 4096, off));
  for (std::size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b.data()[i], std::byte{0});
}

TEST(AioQueue, InjectedErrorFailsTheJobAndItsDependentsNamingTheFile) {
  ScratchDir dir("aioerr");
  MemoryLedger ledger;
  SwapFile f(dir.str(), 3, "t", Category::other, ledger);
  const auto off = f.grow(4 * 4096);
  AioOptions o;
  o.block_size = 4096;
  o.fault = [](const IoRequestInfo& r) { return r.op == IoOp::write && r.offset == 8192 ? ENOSPC : 0; };
  AioQueue q(o);
  HostBuffer a(4 * 4096, Category::other, false, ledger);
  const auto w = q.submit(IoOp::write, f.fd(), f.path(), a.data(), 4 * 4096, off);
  const auto r = q.submit(IoOp::read, f.fd(), f.path(), a.data(), 4096, off, {w});
  try {
    q.wait(w);
    FAIL() << "the injected ENOSPC was swallowed";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[offload]"), std::string::npos) << m;
    EXPECT_NE(m.find(f.path()), std::string::npos) << m;
    EXPECT_NE(m.find(std::strerror(ENOSPC)), std::string::npos) << m;
    EXPECT_NE(m.find("offset 8192"), std::string::npos) << m;
  }
  EXPECT_THROW(q.wait(r), Error);        // the dependent read never ran
  EXPECT_THROW(q.wait_all(), Error);     // and the failure stays visible
  // A job submitted after a failed one it depends on fails too.
  EXPECT_THROW(q.wait(q.submit(IoOp::read, f.fd(), f.path(), a.data(), 4096, off, {w})), Error);
  // Independent jobs still run.
  q.wait(q.submit(IoOp::read, f.fd(), f.path(), a.data(), 4096, off));
}

TEST(AioQueue, RejectsBadOptions) {
  AioOptions o;
  o.block_size = 1000;
  EXPECT_THROW(AioQueue{o}, UserError);
  o = {};
  o.queue_depth = 0;
  EXPECT_THROW(AioQueue{o}, UserError);
}

}  // namespace
}  // namespace strata::offload
