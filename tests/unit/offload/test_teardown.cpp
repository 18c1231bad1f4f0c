// Tearing down the NVMe tier with I/O in flight: an AioQueue, Swapper, NvmeStateStore or
// NvmeValueShardStore destroyed while reads and write-backs are queued or inside the kernel — or
// unwound by OutOfMemory half-way through being built — waits for every transfer it started before
// its buffers go: the destructor does not return while a request is held, nothing lands in freed
// memory, the ledger is back to zero and the swap file is gone. Run under ASan (asan preset).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "framework/memory/out_of_memory.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/trainer.hpp"
#include "offload/aio.hpp"
#include "offload/host_buffer.hpp"
#include "offload/nvme_state_store.hpp"
#include "offload/state_layout.hpp"
#include "offload/swap_file.hpp"
#include "offload/swapper.hpp"
#include "offload/value_shard_store.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

namespace strata::offload {
namespace {

using test::ScratchDir;

// A fault hook that holds every request on the worker thread (as a slow disk holds it in the
// kernel) until the test opens the gate. Outlives every queue that uses it.
class Gate {
 public:
  IoFaultHook hook() {
    return [this](const IoRequestInfo&) {
      std::unique_lock lk(mu_);
      ++held_;
      cv_.notify_all();
      cv_.wait(lk, [&] { return open_; });
      return 0;
    };
  }
  void close() {
    std::lock_guard lk(mu_);
    open_ = false;
    held_ = 0;
  }
  void open() {
    {
      std::lock_guard lk(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Blocks until at least n requests are being held.
  void wait_held(int n) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return held_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int held_ = 0;
};

// Page-aligned blocks of a buffer's size filled with a canary: taken while a destroyed
// object's requests are still held, they would be that object's buffers had it freed them early
// (the allocator hands freed blocks out again), and the held reads would land in them.
class Canaries {
 public:
  explicit Canaries(std::size_t bytes) : bytes_(round_up_io(bytes)) {
    for (int i = 0; i < 16; ++i) {
      blocks_.push_back(static_cast<unsigned char*>(std::aligned_alloc(kIoAlign, bytes_)));
      std::memset(blocks_.back(), 0xa5, bytes_);
    }
  }
  ~Canaries() {
    for (auto* b : blocks_) std::free(b);
  }
  void expect_intact() const {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let a stray transfer land
    for (std::size_t k = 0; k < blocks_.size(); ++k)
      for (std::size_t i = 0; i < bytes_; ++i)
        ASSERT_EQ(blocks_[k][i], 0xa5) << "block " << k << " byte " << i << " overwritten";
  }

 private:
  std::size_t bytes_;
  std::vector<unsigned char*> blocks_;
};

// Destroys `victim` on another thread while the gate holds its requests: the destructor must
// still be running (waiting for them) until the gate opens, and must not have freed the buffers
// those requests transfer into.
template <typename T>
void destroy_while_held(std::unique_ptr<T>& victim, Gate& gate, std::size_t buffer_bytes) {
  std::atomic<bool> destroyed{false};
  std::thread t([&] {
    victim.reset();
    destroyed = true;
  });
  // Give the destructor every chance to (wrongly) return or free; a correct one cannot.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(destroyed.load()) << "destructor returned while a request was still in flight";
  const Canaries canaries(buffer_bytes);
  gate.open();
  t.join();
  EXPECT_TRUE(destroyed.load());
  canaries.expect_intact();
}

TEST(Teardown, AioQueueWaitsForTheRequestsItHandedOutAndDropsTheRest) {
  ScratchDir dir("td-aio");
  MemoryLedger ledger;
  SwapFile f(dir.str(), 0, "t", Category::other, ledger);
  const std::uint64_t bytes = 4 * 8192;
  const auto off = f.grow(bytes);
  HostBuffer src(bytes, Category::other, false, ledger);
  for (std::uint64_t i = 0; i < bytes; ++i) src.data()[i] = static_cast<std::byte>((i * 13 + 1) & 0xff);
  Gate gate;
  AioOptions o;
  o.block_size = 8192;
  o.queue_depth = 2;  // at most two requests handed to the worker; the rest stay queued
  o.fault = gate.hook();
  HostBuffer a(bytes, Category::other, false, ledger), b(bytes, Category::other, false, ledger);
  std::memset(a.data(), 0x5a, bytes);
  std::memset(b.data(), 0x5a, bytes);
  {
    AioQueue q(o);
    q.wait(q.submit(IoOp::write, f.fd(), f.path(), src.data(), bytes, off));
  }
  auto q = std::make_unique<AioQueue>(o);
  gate.close();
  q->submit(IoOp::read, f.fd(), f.path(), a.data(), bytes, off);
  q->submit(IoOp::read, f.fd(), f.path(), b.data(), bytes, off);
  gate.wait_held(1);  // the worker holds a request of the first read
  destroy_while_held(q, gate, bytes);
  // Every request handed out completed before the destructor returned; a job never started is
  // dropped whole. A buffer is either untouched or holds whole blocks of the file.
  for (const HostBuffer* buf : {&a, &b}) {
    for (std::uint64_t blk = 0; blk < bytes; blk += 8192) {
      const bool untouched = std::all_of(buf->data() + blk, buf->data() + blk + 8192,
                                         [](std::byte x) { return x == std::byte{0x5a}; });
      const bool read = std::memcmp(buf->data() + blk, src.data() + blk, 8192) == 0;
      EXPECT_TRUE(untouched || read) << "block at " << blk << " partly written";
    }
  }
  EXPECT_EQ(std::memcmp(a.data(), src.data(), 8192), 0) << "the held request did not complete";
}

SwapperOptions options(const ScratchDir& dir, MemoryLedger& ledger, Gate& gate, int buffers) {
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = buffers;
  o.aio.block_size = 8192;
  o.aio.queue_depth = 2;
  o.aio.thread_count = 2;
  o.aio.fault = gate.hook();
  o.ledger = &ledger;
  return o;
}

TEST(Teardown, SwapperDestroyedWithReadsAndWriteBacksInFlight) {
  for (int round = 0; round < 5; ++round) {
    ScratchDir dir("td-swap");
    MemoryLedger ledger;
    Gate gate;
    const std::uint64_t unit = 40 * 1024;  // below malloc's mmap threshold: freed blocks reused
    auto s = std::make_unique<Swapper>(options(dir, ledger, gate, 3));
    for (int u = 0; u < 6; ++u) s->add_unit(unit);
    for (std::size_t u = 0; u < 6; ++u) {  // every unit written once
      std::memset(s->acquire(u, true), static_cast<int>(u + 1), unit);
      s->release(u, true);
    }
    s->flush();
    gate.close();
    // Read-ahead of units 0 and 1 (their first requests held by the two workers), then the
    // write-back of a dirty resident unit queued behind them.
    s->prefetch({0, 1});
    gate.wait_held(2);
    std::byte* p = s->acquire(5);  // resident: no I/O
    std::memset(p, 0x77, unit);
    s->release(5, true);
    EXPECT_EQ(dir.files(), 1u);
    destroy_while_held(s, gate, unit);
    EXPECT_EQ(dir.files(), 0u);
    EXPECT_EQ(ledger.current(Tier::host), 0u);
    EXPECT_EQ(ledger.current(Tier::nvme), 0u);
  }
}

TEST(Teardown, NvmeValueShardStoreDestroyedWithTransfersInFlight) {
  ScratchDir dir("td-values");
  MemoryLedger ledger;
  Gate gate;
  auto s = std::make_unique<NvmeValueShardStore>(options(dir, ledger, gate, 2));
  for (std::size_t u = 0; u < 5; ++u) s->create(u, 9000, DType::f32);
  for (std::size_t u = 0; u < 5; ++u) {  // every slice written once
    Tensor t = s->acquire(u);
    std::memset(t.raw(), static_cast<int>(u + 1), t.nbytes());
    s->release(u, true);
  }
  s->flush();
  // Acquired while the gate is open (any read completes); its write-back, and whatever the store
  // reads ahead on release, are held.
  Tensor t = s->acquire(2);
  std::memset(t.raw(), 0x11, t.nbytes());
  gate.close();
  s->release(2, true);
  gate.wait_held(1);
  destroy_while_held(s, gate, 9000 * 4);
  EXPECT_EQ(dir.files(), 0u);
  EXPECT_EQ(ledger.current(Tier::host), 0u);
  EXPECT_EQ(ledger.current(Tier::nvme), 0u);
}

// A store whose construction throws half-way (the host tier's cap reached while units are still
// being created, their first write-backs in flight) unwinds without touching freed memory and
// gives back everything it charged.
TEST(Teardown, NvmeStateStoreThatRunsOutOfHostMemoryHalfWayUnwindsCleanly) {
  for (int round = 0; round < 5; ++round) {
    ScratchDir dir("td-oom");
    MemoryLedger ledger;
    Gate gate;
    SwapperOptions o = options(dir, ledger, gate, 4);
    const train::StateLayout l = test::adam_layout(9000, true);
    const std::uint64_t buf = packed_bytes(l);
    ledger.set_cap(Tier::host, 2 * buf + buf / 2);  // room for two of the four buffers
    const Tensor values = Tensor::zeros(Shape{l.elements}, DType::f32);
    std::unique_ptr<NvmeStateStore> s;
    std::thread opener;
    try {
      s = std::make_unique<NvmeStateStore>(o);
      gate.close();
      // Unit 0 and 1 write their master copies (held); unit 2 finds no host memory for a third
      // buffer. The gate opens only after the throw, while the store is being destroyed.
      for (std::size_t u = 0; u < 4; ++u) s->create(u, l, values);
      FAIL() << "four buffers fitted under a cap of two";
    } catch (const OutOfMemory& e) {
      EXPECT_EQ(e.context().tier, Tier::host);
      gate.wait_held(1);
      destroy_while_held(s, gate, static_cast<std::size_t>(buf));
    }
    EXPECT_EQ(dir.files(), 0u);
    EXPECT_EQ(ledger.current(Tier::host), 0u);
    EXPECT_EQ(ledger.current(Tier::nvme), 0u);
  }
}

// The same through the Trainer, as in training: its constructor creates every unit's state and
// throws OutOfMemory half-way; the half-built store goes with the Trainer.
TEST(Teardown, TrainerWhoseNvmeStoreRunsOutOfHostMemoryUnwindsCleanly) {
  ScratchDir dir("td-trainer");
  MemoryLedger ledger;
  nn::GptConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 32;
  nn::Gpt gpt(c);
  nn::ParamStore store(gpt.units(), nn::ParamStoreOptions{DType::bf16, DType::bf16, 1, {}});
  store.initialize(5);
  std::uint64_t largest = 0;
  for (std::size_t u = 0; u < store.num_units(); ++u)
    largest = std::max(largest, packed_bytes(test::adam_layout(store.layout(u).hi - store.layout(u).lo, true)));
  ledger.set_cap(Tier::host, largest + largest / 2);  // one buffer fits, the second does not
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = 3;
  o.aio.block_size = 8192;
  o.aio.fault = [](const IoRequestInfo&) {  // a slow disk: writes still in flight at the throw
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return 0;
  };
  o.ledger = &ledger;
  train::TrainerOptions to;
  to.precision = train::Precision::bf16;
  try {
    train::Trainer t(store, to, {}, std::make_unique<NvmeStateStore>(o));
    FAIL() << "optimizer staging buffers fitted under the host cap";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.context().tier, Tier::host);
    bool names_nvme = false;
    for (const auto& a : e.advice()) names_nvme = names_nvme || a.find("buffer_count") != std::string::npos;
    EXPECT_TRUE(names_nvme) << e.what();
  }
  EXPECT_EQ(dir.files(), 0u);
  EXPECT_EQ(ledger.current(Tier::host), 0u);
  EXPECT_EQ(ledger.current(Tier::nvme), 0u);
  // The parameters the store was built from are intact and usable by a new Trainer.
  train::Trainer again(store, to, {});
  EXPECT_EQ(again.master_shard(0).numel(), store.layout(0).hi - store.layout(0).lo);
}

}  // namespace
}  // namespace strata::offload
