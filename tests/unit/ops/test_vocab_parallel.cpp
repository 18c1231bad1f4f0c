// The vocabulary-parallel composition of cross-entropy equals the whole-vocabulary op: a vocabulary
// split into slices (as tensor-parallel ranks hold them), each slice's row_max, row_sum_exp and
// target_logit reduced across slices and combined (combine_cross_entropy) give the whole's lse and
// loss, and each slice's cross_entropy_backward_slice is the whole's cross_entropy_backward
// restricted to its columns.
// On every backend, for f32, bf16 and f16 logits. Tolerances: lse and loss 1e-6 relative (the
// pieces sum exp in double, the whole op in f32); dlogits as the harness compares a 16-bit output
// with its f32 reference (op_harness.hpp), rtol 1e-6.
#include <algorithm>
#include <cmath>

#include "framework/backend/ops/ops.hpp"
#include "tests/support/numeric.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {
namespace test_vocab_parallel {  // file-local names, unique in a unity build

using ::strata::test::close;

constexpr std::int64_t N = 11, V = 50;
// Three slices of a 50-token vocabulary, the last narrower: [0, 17), [17, 34), [34, 50).
constexpr std::int64_t kStart[] = {0, 17, 34};
constexpr std::int64_t kWidth[] = {17, 17, 16};
// Each slice's first and last columns, ignored rows, and one large logit.
const std::vector<std::int32_t> kTargets = {0, 16, 17, -1, 33, 34, 49, 5, -1, 25, 40};

Tensor f32_on(Device d, std::int64_t n) {
  return Tensor::empty(Shape{n}, DType::f32, TensorOptions{d});
}

std::vector<float> host_vector(const Tensor& t) {
  return to_host(t).to_vector();
}

class VocabParallel : public ::testing::TestWithParam<BackendDType> {};

TEST_P(VocabParallel, SlicesCombinedEqualTheWholeVocabulary) {
  const Backend& b = backend_named(std::get<0>(GetParam()));
  STRATA_SKIP_UNLESS_AVAILABLE(b);
  const DType dt = std::get<1>(GetParam());
  OpCase spec;
  spec.name = "vocab_parallel";
  spec.tensors = {{"logits", Shape{N, V}, 'a', planted(normal(3.0), {{7 * V + 20, 40.0f}})}};
  const Tensor logits_h = draw(spec)[0].to(dt, TensorOptions{});  // the values every side sees
  Tensor targets_h = Tensor::empty(Shape{N}, DType::i32);
  std::copy(kTargets.begin(), kTargets.end(), targets_h.data<std::int32_t>());
  int valid = 0;
  for (std::int32_t t : kTargets) valid += t >= 0;
  const float scale = 1.0f / static_cast<float>(valid);

  const Device d = b.device;
  const Tensor logits = on_device(logits_h, dt, d), targets = on_device(targets_h, DType::i32, d);

  // The whole vocabulary; the backward's reference in f32.
  const Tensor lse_whole = f32_on(d, N);
  const double loss_whole = cross_entropy_forward(logits, targets, lse_whole);
  const Tensor dl_whole = Tensor::empty(Shape{N, V}, DType::f32, TensorOptions{d});
  cross_entropy_backward(logits, lse_whole, targets, dl_whole, scale);

  // The slices, each a contiguous [N, width] tensor of the same values.
  std::vector<Tensor> slices;
  for (int s = 0; s < 3; ++s)
    slices.push_back(
        on_device(logits_h.slice(1, kStart[s], kStart[s] + kWidth[s]).contiguous(), dt, d));
  std::vector<float> max(N, -INFINITY), sum(N, 0.0f), target(N, 0.0f);
  for (int s = 0; s < 3; ++s) {
    const Tensor m = f32_on(d, N);
    row_max(slices[static_cast<std::size_t>(s)], m);
    const std::vector<float> mv = host_vector(m);
    for (int r = 0; r < N; ++r) max[r] = std::max(max[r], mv[r]);
  }
  Tensor max_h = Tensor::empty(Shape{N}, DType::f32);
  std::copy(max.begin(), max.end(), max_h.data<float>());
  const Tensor max_d = on_device(max_h, DType::f32, d);
  for (int s = 0; s < 3; ++s) {
    const Tensor se = f32_on(d, N), tl = f32_on(d, N);
    row_sum_exp(slices[static_cast<std::size_t>(s)], max_d, se);
    target_logit(slices[static_cast<std::size_t>(s)], targets, kStart[s], tl);
    const std::vector<float> sv = host_vector(se), tv = host_vector(tl);
    for (int r = 0; r < N; ++r) sum[r] += sv[r], target[r] += tv[r];
  }
  // Combined on the backend (combine_cross_entropy), from the pieces reduced across the slices.
  Tensor sum_h = Tensor::empty(Shape{N}, DType::f32), target_h = Tensor::empty(Shape{N}, DType::f32);
  std::copy(sum.begin(), sum.end(), sum_h.data<float>());
  std::copy(target.begin(), target.end(), target_h.data<float>());
  const Tensor lse = f32_on(d, N);
  const double loss = combine_cross_entropy(max_d, on_device(sum_h, DType::f32, d),
                                            on_device(target_h, DType::f32, d), targets, lse);
  EXPECT_TRUE(close(host_vector(lse), host_vector(lse_whole), 1e-6)) << "lse";
  EXPECT_NEAR(loss, loss_whole, 1e-6 * std::abs(loss_whole)) << "loss";

  // Backward, each slice from the combined lse, put side by side.
  Tensor dl = Tensor::empty(Shape{N, V}, dt);
  for (int s = 0; s < 3; ++s) {
    const Tensor part = Tensor::empty(Shape{N, kWidth[s]}, dt, TensorOptions{d});
    cross_entropy_backward_slice(slices[static_cast<std::size_t>(s)], lse, targets, kStart[s],
                                 scale, part);
    dl.slice(1, kStart[s], kStart[s] + kWidth[s]).copy_from(to_host(part));
  }
  EXPECT_TRUE(matches_reference(dl, to_host(dl_whole), 1e-6)) << "dlogits";
}

INSTANTIATE_TEST_SUITE_P(Ops, VocabParallel, ::testing::ValuesIn(backend_dtype_params()),
                         backend_dtype_name);

}  // namespace test_vocab_parallel
}  // namespace
}  // namespace strata::ops::test
