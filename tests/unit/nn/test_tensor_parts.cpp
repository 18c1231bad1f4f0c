// A GPT built as tensor-parallel part i of k: every split parameter holds exactly its placement's
// elements of the whole model's initial weights (initialisation by global element index), the
// replicated ones all of them; the vocabulary-parallel embedding summed over the parts is the
// whole embedding bitwise; shapes tp cannot split are one-line errors.
#include <gtest/gtest.h>


#include "framework/backend/ops/ops.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/param_store.hpp"
#include "tests/support/expect_user_error.hpp"

using namespace strata;
using strata::test::expect_user_error;

namespace {

// Element e of a part in the whole parameter, element by element (independent of
// Placement::for_each_run): rows split (dim 0) in `stride` blocks, or columns split (dim 1).
std::int64_t global_index(const nn::Parameter& p, std::int64_t e) {
  const nn::Placement& pl = p.placement;
  if (!pl.split()) return e;
  const std::int64_t rows = p.shape[0], cols = p.shape.numel() / rows;
  const std::int64_t r = e / cols, c = e % cols;
  if (pl.dim == 1) return r * cols * pl.parts + pl.index * cols + c;
  const std::int64_t block = rows / pl.stride;
  const std::int64_t grow = (r / block) * block * pl.parts + pl.index * block + r % block;
  return grow * cols + c;
}

nn::GptConfig small() {
  nn::GptConfig c;
  c.vocab_size = 64;
  c.block_size = 8;
  c.n_layer = 1;
  c.n_head = 4;
  c.n_embd = 16;
  return c;
}

std::vector<float> values(const nn::Parameter& p) { return p.value.to_vector(); }

TEST(TensorParts, StartFromTheWholeModelsWeights) {
  nn::Gpt whole(small());
  nn::ParamStore ws(whole.units(), {});
  ws.initialize(7);
  for (int tp : {2, 4})
    for (int i = 0; i < tp; ++i) {
      SCOPED_TRACE(testing::Message() << "part " << i << " of " << tp);
      nn::Gpt part(small(), {i, tp});
      nn::ParamStore ps(part.units(), {});
      ps.initialize(7);
      int split = 0;
      for (const nn::Parameter* p : part.parameters()) {
        const nn::Parameter* w = ws.find(p->name);
        ASSERT_NE(w, nullptr);
        EXPECT_EQ(p->placement.global_shape(p->shape), w->shape) << p->name;
        split += p->placement.split();
        const std::vector<float> got = values(*p), all = values(*w);
        std::vector<float> want(got.size());
        for (std::size_t e = 0; e < want.size(); ++e)
          want[e] = all[static_cast<std::size_t>(global_index(*p, static_cast<std::int64_t>(e)))];
        EXPECT_EQ(got, want) << p->name;
      }
      // wte, and per block c_attn (weight, bias), attn c_proj weight, c_fc (weight, bias), mlp
      // c_proj weight.
      EXPECT_EQ(split, 1 + 6);
    }
}

TEST(TensorParts, VocabularyParallelEmbeddingSumsToTheWhole) {
  nn::Gpt whole(small());
  nn::ParamStore ws(whole.units(), {});
  ws.initialize(3);
  const Tensor& wte = ws.find("transformer.wte.weight")->value;
  const Tensor& wpe = ws.find("transformer.wpe.weight")->value;
  Tensor tokens = Tensor::empty(Shape{2, 4}, DType::i32);
  const std::int32_t ids[] = {0, 17, 31, 32, 63, 5, 48, 16};
  std::copy_n(ids, 8, tokens.data<std::int32_t>());
  Tensor want = Tensor::empty(Shape{8, 16}, DType::f32);
  ops::embedding_forward(tokens, wte, wpe, want);
  const int tp = 4, rows = 64 / tp;
  Tensor sum = Tensor::zeros(Shape{8, 16}, DType::f32);
  for (int i = 0; i < tp; ++i) {
    Tensor part = Tensor::empty(Shape{8, 16}, DType::f32);
    ops::embedding_forward(tokens, wte.slice(0, i * rows, (i + 1) * rows), i == 0 ? wpe : Tensor(),
                           part, i * rows);
    ops::add_inplace(sum, part);
  }
  EXPECT_EQ(sum.to_vector(), want.to_vector());
  // Backward: each part accumulates only its rows; together the whole table's gradient.
  Tensor dwte = Tensor::zeros(Shape{64, 16}, DType::f32);
  ops::embedding_backward(tokens, want, dwte, Tensor());
  for (int i = 0; i < tp; ++i) {
    Tensor d = Tensor::zeros(Shape{rows, 16}, DType::f32);
    ops::embedding_backward(tokens, want, d, Tensor(), i * rows);
    EXPECT_EQ(d.to_vector(), dwte.slice(0, i * rows, (i + 1) * rows).to_vector()) << "part " << i;
  }
}

TEST(TensorParts, ShapesThatDoNotSplitAreErrors) {
  nn::GptConfig c = small();
  c.vocab_size = 50;
  expect_user_error([&] { nn::Gpt g(c, {0, 4}); }, "vocab_size 50 does not split over tensor_parallel_size 4");
  c = small();
  c.n_head = 2;
  expect_user_error([&] { nn::Gpt g(c, {0, 4}); }, "n_head 2 does not split over tensor_parallel_size 4");
}

}  // namespace
