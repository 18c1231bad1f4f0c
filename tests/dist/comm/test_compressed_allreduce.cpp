// The 1-bit compressed all-reduce against a serial simulation of the same N workers, written
// here element by element without packing: every rank's result, worker error and server error
// must equal the simulation's bitwise, over several rounds (the error feedback carries over), for
// tensors whose sizes need padding, one of them zero-length... and the compression must shrink:
// the result is the average up to the compression error, which error feedback keeps bounded.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "parallel/comm/compressed_allreduce.hpp"
#include "tests/dist/comm/dist_env.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_compressed_allreduce {

const std::vector<std::size_t> kSizes = {37, 5, 0, 130};

std::vector<float> input(int rank, int round, std::size_t t, std::size_t n) {
  std::mt19937 gen(static_cast<unsigned>(1000 * round + 100 * rank + static_cast<int>(t)));
  std::normal_distribution<float> d(0.0f, 1.0f + static_cast<float>(t));
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  if (n > 3) v[3] = 0.0f;  // zero counts as +
  return v;
}

struct Worker {
  std::vector<std::vector<float>> data, werr, serr;
};

float rms(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return static_cast<float>(std::sqrt(s) / std::sqrt(static_cast<double>(x.size())));
}

// One round of every worker, serially.
void simulate(std::vector<Worker>& w, int N) {
  for (std::size_t t = 0; t < kSizes.size(); ++t) {
    const std::size_t padded = optim::onebit_padded_size(kSizes[t], N), c = padded / N;
    if (kSizes[t] == 0) continue;
    std::vector<std::vector<float>> sgn(N, std::vector<float>(padded));
    std::vector<float> scale(N);
    for (int r = 0; r < N; ++r) {
      std::vector<float> buf(padded, 0.0f);
      for (std::size_t i = 0; i < kSizes[t]; ++i) buf[i] = w[r].data[t][i];
      for (std::size_t i = 0; i < padded; ++i) buf[i] += w[r].werr[t][i];
      scale[r] = rms(buf);
      for (std::size_t i = 0; i < padded; ++i) {
        sgn[r][i] = buf[i] >= 0.0f ? 1.0f : -1.0f;
        w[r].werr[t][i] = buf[i] - scale[r] * sgn[r][i];
      }
    }
    std::vector<float> out(padded);
    for (int j = 0; j < N; ++j) {  // server j
      std::vector<float> comp(c, 0.0f);
      for (int r = 0; r < N; ++r)
        for (std::size_t k = 0; k < c; ++k)
          comp[k] += sgn[r][j * c + k] * (scale[r] * static_cast<float>(1.0 / N));
      for (std::size_t k = 0; k < c; ++k) comp[k] += w[j].serr[t][k];
      const float s = rms(comp);
      for (std::size_t k = 0; k < c; ++k) {
        const float sg = comp[k] >= 0.0f ? 1.0f : -1.0f;
        w[j].serr[t][k] = comp[k] - s * sg;
        out[j * c + k] = s * sg;
      }
    }
    for (int r = 0; r < N; ++r)
      for (std::size_t i = 0; i < kSizes[t]; ++i) w[r].data[t][i] = out[i];
  }
}

TEST(CompressedAllReduce, EqualsASerialSimulationOfTheWorkersBitwise) {
  const auto& g = world();
  const int N = g.size(), me = g.rank();
  std::vector<Worker> sim(N);
  Worker mine;
  for (int r = 0; r <= N; ++r) {
    Worker& w = r < N ? sim[r] : mine;
    for (std::size_t n : kSizes) {
      const std::size_t p = optim::onebit_padded_size(n, N);
      w.data.emplace_back(n);
      w.werr.emplace_back(p, 0.0f);
      w.serr.emplace_back(p / N, 0.0f);
    }
  }
  double worst = 0;
  for (int round = 0; round < 4; ++round) {
    std::vector<double> avg_first;
    for (int r = 0; r < N; ++r)
      for (std::size_t t = 0; t < kSizes.size(); ++t) sim[r].data[t] = input(r, round, t, kSizes[t]);
    for (std::size_t t = 0; t < kSizes.size(); ++t) mine.data[t] = input(me, round, t, kSizes[t]);
    for (std::size_t i = 0; i < kSizes[0]; ++i) {
      double s = 0;
      for (int r = 0; r < N; ++r) s += sim[r].data[0][i];
      avg_first.push_back(s / N);
    }
    simulate(sim, N);
    std::vector<optim::ErrorFeedbackTensor> ts;
    for (std::size_t t = 0; t < kSizes.size(); ++t)
      ts.push_back({mine.data[t].data(), kSizes[t], mine.werr[t].data(), mine.serr[t].data()});
    parallel::compressed_allreduce(g, ts);
    for (std::size_t t = 0; t < kSizes.size(); ++t) {
      const Worker& want = N == 1 ? mine : sim[me];
      // memcmp only on a non-empty tensor: an empty vector's data() may be null, and memcmp's
      // pointers must not be, even for 0 bytes (UBSan: scripts/test --sanitize address).
      EXPECT_TRUE(kSizes[t] == 0 || std::memcmp(mine.data[t].data(), want.data[t].data(), kSizes[t] * 4) == 0)
          << "round " << round << " tensor " << t;
      EXPECT_TRUE(mine.werr[t] == want.werr[t]) << "worker error, round " << round << " tensor " << t;
      EXPECT_TRUE(mine.serr[t] == want.serr[t]) << "server error, round " << round << " tensor " << t;
    }
    for (std::size_t i = 0; i < kSizes[0]; ++i)
      worst = std::max(worst, std::fabs(mine.data[0][i] - avg_first[i]));
  }
  if (N == 1) {
    // One rank: nothing to average, nothing compressed (as DeepSpeed).
    EXPECT_TRUE(mine.data[0] == input(0, 3, 0, kSizes[0]));
  } else {
    // Compressed: sign × scale, not the average itself, but of its size (inputs of scale 1).
    EXPECT_GT(worst, 0.0);
    EXPECT_LT(worst, 3.0);
  }
}

}  // namespace test_compressed_allreduce
}  // namespace
