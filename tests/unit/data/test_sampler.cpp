#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "framework/core/error.hpp"
#include "framework/data/eval_sampler.hpp"
#include "framework/data/permutation.hpp"
#include "framework/data/sampler.hpp"
#include "framework/data/token_writer.hpp"
#include "temp_dir.hpp"

namespace strata::data {
namespace {

using testing::TempDir;

// A file whose token i is i, so a row's first input token is the index where its window starts.
class SamplerTest : public ::testing::Test {
 protected:
  const TokenFile& file(std::uint64_t n) {
    const std::string path = dir_ / ("n" + std::to_string(n) + ".tok");
    TokenFileWriter w(path, 4, 1 << 20);
    std::vector<std::uint32_t> t(n);
    std::iota(t.begin(), t.end(), 0u);
    w.append(t);
    w.commit();
    files_.push_back(std::make_unique<TokenFile>(path));
    return *files_.back();
  }

  TempDir dir_;
  std::vector<std::unique_ptr<TokenFile>> files_;
};

struct Batch {
  std::vector<std::int32_t> inputs, targets;
  bool operator==(const Batch&) const = default;
};

Batch draw(BatchSampler& s) {
  Batch b;
  b.inputs.resize(static_cast<std::size_t>(s.micro_batch()) * s.seq_len());
  b.targets.resize(b.inputs.size());
  s.next(b.inputs.data(), b.targets.data());
  return b;
}

// Every row is a window: inputs consecutive tokens, targets shifted by one.
void expect_windows(const Batch& b, int T) {
  for (std::size_t r = 0; r * T < b.inputs.size(); ++r) {
    for (int t = 0; t < T; ++t) {
      ASSERT_EQ(b.inputs[r * T + t], b.inputs[r * T] + t);
      ASSERT_EQ(b.targets[r * T + t], b.inputs[r * T] + t + 1);
    }
  }
}

TEST_F(SamplerTest, WindowCount) {
  EXPECT_EQ(window_count(0, 8), 0u);
  EXPECT_EQ(window_count(8, 8), 0u);
  EXPECT_EQ(window_count(9, 8), 1u);
  EXPECT_EQ(window_count(16, 8), 1u);
  EXPECT_EQ(window_count(17, 8), 2u);
}

TEST_F(SamplerTest, SequentialFormulaSingleRank) {
  const int T = 8, micro = 3;
  BatchSampler s(file(1000), T, micro);  // W = 999 / 8 = 124
  ASSERT_EQ(s.windows(), 124u);
  for (std::uint64_t k = 0; k < 100; ++k) {  // 300 rows: crosses two epoch boundaries
    const Batch b = draw(s);
    expect_windows(b, T);
    for (int i = 0; i < micro; ++i) {
      const std::uint64_t g = k * micro + i;
      ASSERT_EQ(b.inputs[i * T], static_cast<std::int32_t>((g % 124) * T))
          << "k=" << k << " i=" << i;
    }
  }
  EXPECT_EQ(s.state().position, 300u);
  EXPECT_EQ(s.state().epoch, 2u);
}

TEST_F(SamplerTest, SequentialFormulaWithDataParallelRanks) {
  const int T = 5, micro = 2, dp = 3;
  const TokenFile& f = file(301);  // W = 60
  for (int rank = 0; rank < dp; ++rank) {
    BatchSampler s(f, T, micro, dp, rank);
    for (std::uint64_t k = 0; k < 25; ++k) {
      const Batch b = draw(s);
      expect_windows(b, T);
      for (int i = 0; i < micro; ++i) {
        const std::uint64_t g = k * dp * micro + rank * micro + i;
        ASSERT_EQ(b.inputs[i * T], static_cast<std::int32_t>((g % 60) * T));
      }
    }
    EXPECT_EQ(s.state().position, 25u * dp * micro);  // global, the same on every rank
  }
}

// One rank with micro-batch N*b reads, per step, exactly the rows that N ranks with micro-batch b
// read together, rank r holding rows r*b .. r*b+b-1 of the big batch.
TEST_F(SamplerTest, DataParallelEquivalence) {
  const int T = 4, b = 2;
  const TokenFile& f = file(4 * 37 + 1);  // W = 37: no batch size here divides it
  for (bool shuffle : {false, true}) {
    for (int N : {2, 3, 4}) {
      BatchSampler one(f, T, N * b, 1, 0, shuffle, 1234);
      std::vector<BatchSampler> ranks;
      for (int r = 0; r < N; ++r) ranks.emplace_back(f, T, b, N, r, shuffle, 1234);
      for (int step = 0; step < 40; ++step) {  // ~ 4 epochs
        const Batch big = draw(one);
        Batch joined;
        for (auto& s : ranks) {
          const Batch part = draw(s);
          joined.inputs.insert(joined.inputs.end(), part.inputs.begin(), part.inputs.end());
          joined.targets.insert(joined.targets.end(), part.targets.begin(), part.targets.end());
        }
        ASSERT_EQ(big, joined) << "N=" << N << " shuffle=" << shuffle << " step=" << step;
        for (auto& s : ranks) ASSERT_EQ(s.state(), one.state());
      }
    }
  }
}

TEST_F(SamplerTest, ShuffleIsAPermutationPerEpochThatVariesWithEpochAndSeed) {
  const int T = 3;
  const TokenFile& f = file(3 * 500 + 1);  // W = 500
  BatchSampler s(f, T, 1, 1, 0, true, 42);
  BatchSampler other_seed(f, T, 1, 1, 0, true, 43);
  const std::uint64_t W = s.windows();
  std::vector<std::vector<std::uint64_t>> epochs;
  for (std::uint64_t e = 0; e < 3; ++e) {
    std::vector<std::uint64_t> order;
    for (std::uint64_t j = 0; j < W; ++j) order.push_back(s.window_of_row(e * W + j));
    std::vector<std::uint64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::uint64_t> all(W);
    std::iota(all.begin(), all.end(), 0u);
    ASSERT_EQ(sorted, all) << "epoch " << e << " is not a permutation of the windows";
    epochs.push_back(order);
    std::vector<std::uint64_t> order2;
    for (std::uint64_t j = 0; j < W; ++j) order2.push_back(other_seed.window_of_row(e * W + j));
    EXPECT_NE(order, order2) << "seeds 42 and 43 give the same order in epoch " << e;
  }
  std::vector<std::uint64_t> identity(W);
  std::iota(identity.begin(), identity.end(), 0u);
  EXPECT_NE(epochs[0], identity);
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  // next() reads exactly the windows window_of_row names.
  for (std::uint64_t g = 0; g < 2 * W + 5; ++g) {
    const Batch b = draw(s);
    expect_windows(b, T);
    ASSERT_EQ(b.inputs[0], static_cast<std::int32_t>(s.window_of_row(g) * T));
  }
  // The same seed gives the same order in a new sampler.
  BatchSampler again(f, T, 1, 1, 0, true, 42);
  for (std::uint64_t g = 0; g < W; ++g) ASSERT_EQ(again.window_of_row(g), epochs[0][g]);
}

TEST(KeyedPermutation, IsABijectionForAwkwardSizes) {
  for (std::uint64_t n : {1, 2, 3, 4, 5, 15, 16, 17, 100, 1000, 4097, 65537}) {
    for (std::uint64_t key : {0ull, 1ull, 0xdeadbeefull}) {
      KeyedPermutation p(n, key);
      std::vector<bool> hit(n, false);
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t v = p(i);
        ASSERT_LT(v, n);
        ASSERT_FALSE(hit[v]) << "n=" << n << " key=" << key << ": " << v << " hit twice";
        hit[v] = true;
      }
    }
  }
  KeyedPermutation a(1000, 1), b(1000, 2);
  int same = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) same += a(i) == b(i);
  EXPECT_LT(same, 20);  // ~1 expected for independent permutations
}

TEST_F(SamplerTest, StateRestoreResumesMidEpochAndAcrossEpochBoundary) {
  const int T = 4, micro = 3;
  const TokenFile& f = file(4 * 20 + 1);  // W = 20
  for (bool shuffle : {false, true}) {
    // Saved at 6 rows (mid-epoch), at 18 rows (the next batch straddles the boundary) and at
    // 21 rows (just past it).
    for (int saved_after : {2, 6, 7}) {
      BatchSampler a(f, T, micro, 1, 0, shuffle, 7);
      for (int k = 0; k < saved_after; ++k) draw(a);
      const SamplerState st = a.state();
      EXPECT_EQ(st.position, static_cast<std::uint64_t>(saved_after * micro));
      EXPECT_EQ(st.epoch, st.position / 20);
      BatchSampler b(f, T, micro, 1, 0, shuffle, 7);
      b.set_state(st);
      for (int k = 0; k < 15; ++k)
        ASSERT_EQ(draw(a), draw(b)) << "shuffle=" << shuffle << " k=" << k;
    }
  }
}

TEST_F(SamplerTest, StateMovesBetweenDataParallelSizes) {
  const int T = 4;
  const TokenFile& f = file(4 * 23 + 1);
  BatchSampler one(f, T, 4, 1, 0, true, 9);  // 1 rank, micro 4
  for (int k = 0; k < 7; ++k) draw(one);
  std::vector<BatchSampler> two;  // resumed on 2 ranks, micro 2
  for (int r = 0; r < 2; ++r) {
    two.emplace_back(f, T, 2, 2, r, true, 9);
    two.back().set_state(one.state());
  }
  for (int k = 0; k < 10; ++k) {
    const Batch big = draw(one);
    const Batch r0 = draw(two[0]), r1 = draw(two[1]);
    std::vector<std::int32_t> joined = r0.inputs;
    joined.insert(joined.end(), r1.inputs.begin(), r1.inputs.end());
    ASSERT_EQ(big.inputs, joined) << k;
  }
}

TEST_F(SamplerTest, StateFromAnotherDatasetIsRejected) {
  BatchSampler s(file(4 * 20 + 1), 4, 1);         // W = 20
  EXPECT_THROW(s.set_state({45, 1}), UserError);  // position 45 is epoch 2 here
  s.set_state({45, 2});
  EXPECT_EQ(s.epoch(), 2u);
}

TEST_F(SamplerTest, TinyDatasetIsAClearError) {
  const TokenFile& f = file(8);
  try {
    BatchSampler s(f, 8, 1);
    FAIL() << "no error";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("holds 8 tokens"), std::string::npos) << what;
    EXPECT_NE(what.find("at least 9 tokens"), std::string::npos) << what;
  }
  BatchSampler ok(file(9), 8, 2);  // exactly one window, read twice per micro-batch
  const Batch b = draw(ok);
  EXPECT_EQ(b.inputs[0], 0);
  EXPECT_EQ(b.inputs[8], 0);
  EXPECT_EQ(b.targets[15], 8);
}

TEST_F(SamplerTest, InvalidArguments) {
  const TokenFile& f = file(100);
  EXPECT_THROW(BatchSampler(f, 0, 1), UserError);
  EXPECT_THROW(BatchSampler(f, 4, 0), UserError);
  EXPECT_THROW(BatchSampler(f, 4, 1, 2, 2), UserError);
  EXPECT_THROW(BatchSampler(f, 4, 1, 0, 0), UserError);
}

TEST_F(SamplerTest, TensorOutput) {
  const TokenFile& f = file(100);
  BatchSampler s(f, 5, 2, 1, 0, false, 0);
  Tensor in = Tensor::empty(Shape{2, 5}, DType::i32), tg = Tensor::empty(Shape{2, 5}, DType::i32);
  s.next(in, tg);
  EXPECT_EQ(in.data<std::int32_t>()[5], 5);
  EXPECT_EQ(tg.data<std::int32_t>()[9], 10);
  Tensor wrong = Tensor::empty(Shape{2, 4}, DType::i32);
  EXPECT_THROW(s.next(wrong, tg), Error);
}

TEST_F(SamplerTest, EvalSamplerOnePassSplitAcrossRanks) {
  const int T = 4, micro = 2, dp = 2;
  const TokenFile& f = file(4 * 11 + 1);  // W = 11: the last step is partial
  std::vector<EvalSampler> ranks;
  for (int r = 0; r < dp; ++r) ranks.emplace_back(f, T, micro, dp, r);
  EXPECT_EQ(ranks[0].steps(), 3u);  // ceil(11 / 4)
  std::vector<std::int32_t> starts;
  std::vector<std::int32_t> in(micro * T), tg(micro * T);
  for (std::uint64_t step = 0; step < ranks[0].steps(); ++step) {
    for (auto& s : ranks) {
      ASSERT_FALSE(s.done());
      const int real = s.next(in.data(), tg.data());
      for (int i = 0; i < real; ++i) {
        starts.push_back(in[i * T]);
        ASSERT_EQ(tg[i * T + T - 1], in[i * T] + T);
      }
      for (int i = real; i < micro; ++i) ASSERT_EQ(in[i * T], 0);
    }
  }
  for (auto& s : ranks) EXPECT_TRUE(s.done());
  std::vector<std::int32_t> expected;
  for (int w = 0; w < 11; ++w) expected.push_back(w * T);
  EXPECT_EQ(starts, expected);  // every window once, in order
  // Restartable.
  ranks[1].reset();
  ranks[1].next(in.data(), tg.data());
  EXPECT_EQ(in[0], 2 * T);
  EvalSampler limited(f, T, micro, 1, 0, 3);
  EXPECT_EQ(limited.windows(), 3u);
  EXPECT_EQ(limited.steps(), 2u);
  EXPECT_THROW(EvalSampler(file(4), T, 1), UserError);
}

}  // namespace
}  // namespace strata::data
