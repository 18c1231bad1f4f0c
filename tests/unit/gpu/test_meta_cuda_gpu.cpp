// The meta-CUDA op table (framework/backend/ops/meta_cuda_table.cpp: what a GPU job's plan
// charges) against the CUDA ops on a GPU: the workspace each op takes (the ledger's peak and what
// is left after it) is the same, for the products through cuBLASLt (which the CPU emulator of
// tests/cuda_emu cannot run) and for embedding backward with the real CUB (its temporary storage
// asked of the runtime, MetaCudaQueries), whose upper bound for plans made without a GPU must
// cover CUB's figure. Skipped without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "framework/backend/cuda/ops/workspace_sizes.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "framework/core/meta_device.hpp"
#include "tests/unit/gpu/gpu_test_util.hpp"

namespace strata {
namespace {
namespace test_meta_cuda_gpu {  // file-local names, unique in a unity build

struct Spec {
  Shape shape;
  DType dtype = DType::f32;
  bool none = false;
};
const Spec kNone{Shape{1}, DType::f32, true};

using Call = std::function<void(const ops::OpTable&, std::vector<Tensor>&)>;

// The device tier's workspace peak and remainder of `call` on tensors of `specs` (zeros) on
// `device` (cuda:0 or meta_cuda()), through that device's op table (the ledger is charged on the
// host, as each op allocates and releases: nothing to wait for).
std::pair<std::uint64_t, std::uint64_t> charged(Device device, const std::vector<Spec>& specs,
                                                const Call& call) {
  MemoryLedger ledger;
  const TensorOptions o{device, Tier::device, Category::other, &ledger};
  std::vector<Tensor> ts;
  for (const Spec& s : specs) ts.push_back(s.none ? Tensor() : Tensor::zeros(s.shape, s.dtype, o));
  call(ops::op_table(device), ts);
  const MemorySnapshot s = ledger.snapshot();
  constexpr int d = static_cast<int>(Tier::device), w = static_cast<int>(Category::workspace);
  return {s.peak[d][w], s.current[d][w]};
}

void expect_same(const std::string& what, const std::vector<Spec>& specs, const Call& call) {
  const auto gpu = charged(Device::cuda(0), specs, call);
  const auto meta = charged(meta_cuda(), specs, call);
  EXPECT_EQ(meta.first, gpu.first) << what << ": workspace peak (meta-CUDA vs the GPU)";
  EXPECT_EQ(meta.second, gpu.second) << what << ": workspace left";
}

const DType kFloat[] = {DType::f32, DType::bf16, DType::f16};
std::string dn(DType d) { return std::string(dtype_name(d)); }

TEST(MetaCudaGpu, cuda_ProductsAreChargedWhatCublasLtTakes) {
  SKIP_WITHOUT_GPU();
  const std::int64_t N = 96, in = 40, out = 72;
  for (const DType x : kFloat)
    for (const DType w : kFloat) {
      const std::string k = " x " + dn(x) + " W " + dn(w);
      for (const bool bias : {false, true})
        expect_same("linear_forward" + k + (bias ? " bias" : ""),
                    {{Shape{N, in}, x}, {Shape{out, in}, w}, bias ? Spec{Shape{out}, w} : kNone,
                     {Shape{N, out}, x}},
                    [](const ops::OpTable& t, std::vector<Tensor>& v) {
                      t.linear_forward(v[0], v[1], v[2], v[3]);
                    });
      for (const bool dx : {true, false})
        expect_same("linear_backward" + k + (dx ? "" : " no dx"),
                    {{Shape{N, in}, x}, {Shape{out, in}, w}, {Shape{N, out}, x},
                     dx ? Spec{Shape{N, in}, x} : kNone, {Shape{out, in}, w}, {Shape{out}, w}},
                    [](const ops::OpTable& t, std::vector<Tensor>& v) {
                      t.linear_backward(v[0], v[1], v[2], v[3], v[4], v[5]);
                    });
      for (const DType c : kFloat)
        for (const float beta : {0.0f, 1.0f})
          for (const bool ta : {false, true})
            expect_same("matmul" + k + " C " + dn(c) + (ta ? " ta" : "") +
                            (beta != 0.0f ? " beta 1" : ""),
                        {{ta ? Shape{in, N} : Shape{N, in}, x}, {Shape{in, out}, w},
                         {Shape{N, out}, c}},
                        [ta, beta](const ops::OpTable& t, std::vector<Tensor>& v) {
                          t.matmul(v[0], v[1], v[2], ta, false, 1.0f, beta);
                        });
    }
}

TEST(MetaCudaGpu, cuda_EmbeddingBackwardIsChargedCubsStorage) {
  SKIP_WITHOUT_GPU();
  for (const std::int64_t V : {50, 256, 50257})
    for (const std::int64_t T : {16, 128}) {
      const std::int64_t B = 8, C = 24;
      const std::string k = " V " + std::to_string(V) + " T " + std::to_string(T);
      expect_same("embedding_backward" + k,
                  {{Shape{B, T}, DType::i32}, {Shape{B * T, C}, DType::bf16},
                   {Shape{V, C}, DType::bf16}, {Shape{T, C}, DType::bf16}},
                  [](const ops::OpTable& t, std::vector<Tensor>& v) {
                    t.embedding_backward(v[0], v[1], v[2], v[3], -1, ops::TokenCheck::in_op);
                  });
      // The bound a plan made without a GPU charges covers CUB's figure.
      std::size_t exact = 0;
      ASSERT_TRUE(ops::meta_cuda_queries().embedding_dwte_scratch_bytes);
      ASSERT_TRUE(ops::meta_cuda_queries().embedding_dwte_scratch_bytes(B * T, V, &exact));
      const std::size_t bound = cuda_ops::embedding_dwte_scratch_total(
          B * T, cuda_ops::embedding_dwte_cub_bound(B * T, cuda_ops::embedding_key_bits(V)));
      EXPECT_GE(bound, exact) << k;
      std::printf("embedding_backward%s: scratch %zu B (CUB's figure), %zu B (the bound)\n",
                  k.c_str(), exact, bound);
    }
}

TEST(MetaCudaGpu, cuda_LayersAreChargedWhatTheCudaOpsTake) {
  SKIP_WITHOUT_GPU();
  for (const DType d : kFloat) {
    const std::string k = " " + dn(d);
    const std::int64_t N = 300, C = 40, B = 2, T = 9, H = 2, E = 16;
    expect_same("layernorm_backward" + k,
                {{Shape{N, C}, d}, {Shape{N, C}, d}, {Shape{C}, d}, {Shape{N}}, {Shape{N}},
                 {Shape{N, C}, d}, {Shape{C}, d}, {Shape{C}, d}},
                [](const ops::OpTable& t, std::vector<Tensor>& v) {
                  t.layernorm_backward(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
                });
    expect_same("attention_backward" + k,
                {{Shape{B, T, 3 * E}, d}, {Shape{B, T, E}, d}, {Shape{B, H, T}}, {Shape{B, T, E}, d},
                 {Shape{B, T, 3 * E}, d}},
                [](const ops::OpTable& t, std::vector<Tensor>& v) {
                  t.attention_forward(v[0], v[1], v[2], 2);
                  t.attention_backward(v[0], v[1], v[2], v[3], v[4], 2);
                });
    expect_same("cross_entropy_forward, sum_squares, has_inf_or_nan" + k,
                {{Shape{N, 37}, d}, {Shape{N}, DType::i32}, {Shape{N}}, {Shape{1}, DType::f64}},
                [](const ops::OpTable& t, std::vector<Tensor>& v) {
                  t.row_max(v[0], v[2]);
                  t.cross_entropy_forward(v[0], v[1], v[2], v[3]);
                  t.sum_squares(v[0]);
                  t.has_inf_or_nan(v[0]);
                });
  }
}

}  // namespace test_meta_cuda_gpu
}  // namespace
}  // namespace strata
