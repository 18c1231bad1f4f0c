// Tensor: allocation and ledger charges, views sharing storage, copies across dtypes and tiers,
// fills on strided views, element access, and the errors bad views raise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/core/error.hpp"
#include "framework/core/half.hpp"
#include "framework/core/tensor.hpp"
#include "framework/memory/ledger.hpp"

using namespace strata;

namespace {

// A row-major f32 tensor holding 0, 1, 2, ... charged to `l`.
Tensor iota(const Shape& s, MemoryLedger& l) {
  Tensor t = Tensor::empty(s, DType::f32, {.ledger = &l});
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

}  // namespace

TEST(Tensor, EmptyAndZeros) {
  MemoryLedger l;
  Tensor t = Tensor::empty({2, 3, 4}, DType::f32, {.category = Category::params, .ledger = &l});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.rank(), 3u);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.strides(), (std::vector<std::int64_t>{12, 4, 1}));
  EXPECT_EQ(t.offset(), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_EQ(t.tier(), Tier::device);
  EXPECT_EQ(t.category(), Category::params);
  EXPECT_EQ(l.current(Tier::device, Category::params), 96u);

  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i8, DType::i64}) {
    Tensor z = Tensor::zeros({5, 3}, dt, {.ledger = &l});
    for (std::int64_t i = 0; i < z.numel(); ++i) EXPECT_EQ(z.item(i), 0.0) << dtype_name(dt);
  }

  Tensor e = Tensor::empty({0, 7}, DType::bf16, {.ledger = &l});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.nbytes(), 0u);
  EXPECT_TRUE(e.to_vector().empty());
  e.fill(3.0);  // no elements: nothing happens
  e.zero();

  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  EXPECT_THROW(undefined.raw(), Error);
  EXPECT_THROW(undefined.fill(1.0), Error);
  EXPECT_THROW(undefined.item(), Error);
}

TEST(Tensor, StorageIsReleasedWithTheLastView) {
  MemoryLedger l;
  Tensor v;
  {
    Tensor t = Tensor::zeros({4, 4}, DType::f32,
                             {.tier = Tier::host, .category = Category::grads, .ledger = &l});
    v = t.slice(0, 1, 2);
    EXPECT_EQ(l.current(Tier::host, Category::grads), 64u);
  }
  EXPECT_EQ(l.current(Tier::host, Category::grads), 64u);  // the view keeps it alive
  v = Tensor();
  EXPECT_EQ(l.current(Tier::host, Category::grads), 0u);
  EXPECT_EQ(l.peak(Tier::host, Category::grads), 64u);
}

TEST(Tensor, ViewInfersMinusOneAndSharesStorage) {
  MemoryLedger l;
  Tensor t = iota({2, 3, 4}, l);
  Tensor v = t.view({6, -1});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_EQ(v.storage(), t.storage());
  EXPECT_EQ(t.view({-1}).shape(), (Shape{24}));
  EXPECT_EQ(t.view({-1, 2, 3}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(t.flat().shape(), (Shape{24}));
  EXPECT_EQ(v.item(5 * 4 + 3), 23.0);
  v.data<float>()[0] = 100.0f;  // writes through
  EXPECT_EQ(t.item(0), 100.0);
  // A contiguous slice along dim 0 keeps its offset through a view.
  Tensor s = t.slice(0, 1, 2).view({3, 4});
  EXPECT_EQ(s.item(0), 12.0);

  EXPECT_THROW(t.view({-1, -1}), Error);  // two unknowns
  EXPECT_THROW(t.view({5, -1}), Error);   // 24 not divisible by 5
  EXPECT_THROW(t.view({5, 5}), Error);    // wrong element count
  EXPECT_THROW(t.view({0, -1}), Error);
  EXPECT_THROW(t.transpose(0, 1).view({24}), Error);  // not contiguous
}

TEST(Tensor, SliceSelectTransposeAreViews) {
  MemoryLedger l;
  Tensor t = iota({3, 4}, l);  // [[0 1 2 3] [4 5 6 7] [8 9 10 11]]

  Tensor cols = t.slice(1, 1, 3);  // [[1 2] [5 6] [9 10]]
  EXPECT_EQ(cols.shape(), (Shape{3, 2}));
  EXPECT_EQ(cols.storage(), t.storage());
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.to_vector(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(t.slice(-1, 3, 4).to_vector(), (std::vector<float>{3, 7, 11}));
  EXPECT_EQ(t.slice(0, 1, 1).numel(), 0);

  Tensor row = t.select(2);
  EXPECT_EQ(row.shape(), (Shape{4}));
  EXPECT_EQ(row.storage(), t.storage());
  EXPECT_TRUE(row.is_contiguous());
  EXPECT_EQ(row.to_vector(), (std::vector<float>{8, 9, 10, 11}));

  Tensor tr = t.transpose(0, 1);
  EXPECT_EQ(tr.shape(), (Shape{4, 3}));
  EXPECT_EQ(tr.storage(), t.storage());
  EXPECT_EQ(tr.strides(), (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(tr.to_vector(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(t.transpose(-1, -2).shape(), (Shape{4, 3}));

  // Writes through any view land in the shared storage.
  cols.select(1).data<float>()[1] = -6.0f;  // element (1, 2) of t
  EXPECT_EQ(t.item(6), -6.0);
  EXPECT_EQ(tr.item(2 * 3 + 1), -6.0);
}

TEST(Tensor, BadViewsThrow) {
  MemoryLedger l;
  Tensor t = iota({3, 4}, l);
  EXPECT_THROW(t.slice(2, 0, 1), Error);  // no dim 2
  EXPECT_THROW(t.slice(-3, 0, 1), Error);
  EXPECT_THROW(t.slice(1, 0, 5), Error);  // past the end
  EXPECT_THROW(t.slice(1, 3, 2), Error);  // start > end
  EXPECT_THROW(t.slice(0, -1, 2), Error);
  EXPECT_THROW(t.select(3), Error);
  EXPECT_THROW(t.select(-1), Error);
  EXPECT_THROW(t.select(0).select(0).select(0), Error);  // rank 0 has no dim 0
  EXPECT_THROW(t.transpose(0, 2), Error);
  EXPECT_THROW(t.data<std::int32_t>(), Error);  // holds f32
  EXPECT_THROW(Tensor::empty({2, -3}, DType::f32, {.ledger = &l}), Error);
  EXPECT_THROW(Tensor::empty({2, -1}, DType::f32, {.ledger = &l}), Error);  // -1 is for views
  // Hand-made views must stay inside their storage.
  const auto st = t.storage();
  EXPECT_THROW(Tensor(st, DType::f32, Shape{-1}, {1}, 0), Error);
  EXPECT_THROW(Tensor(st, DType::f32, Shape{13}, {1}, 0), Error);
  EXPECT_THROW(Tensor(st, DType::f32, Shape{12}, {1}, 1), Error);
  EXPECT_THROW(Tensor(st, DType::f32, Shape{4, 4}, {4, 1}, 0), Error);
  EXPECT_THROW(Tensor(st, DType::f64, Shape{7}, {1}, 0), Error);  // 56 bytes > 48
  EXPECT_THROW(Tensor(st, DType::f32, Shape{2}, {1}, -1), Error);
  EXPECT_THROW(Tensor(st, DType::f32, Shape{2, 2}, {1}, 0), Error);  // strides/rank mismatch
  EXPECT_NO_THROW(Tensor(st, DType::f32, Shape{12}, {1}, 0));
  EXPECT_NO_THROW(Tensor(st, DType::f32, Shape{3}, {4}, 3));
  EXPECT_NO_THROW(Tensor(st, DType::f32, Shape{0}, {1}, 12));  // empty view at the end
  Tensor rev(st, DType::f32, Shape{12}, {-1}, 11);             // reversed view
  EXPECT_EQ(rev.item(0), 11.0);
  EXPECT_EQ(rev.item(11), 0.0);
  EXPECT_THROW(Tensor(st, DType::f32, Shape{12}, {-1}, 10), Error);
}

TEST(Tensor, ContiguousOfATransposedView) {
  MemoryLedger l;
  Tensor t = iota({2, 3}, l);
  EXPECT_EQ(t.contiguous().storage(), t.storage());  // already contiguous: same tensor
  Tensor c = t.transpose(0, 1).contiguous();
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  EXPECT_EQ(c.strides(), (std::vector<std::int64_t>{2, 1}));
  const float* p = c.data<float>();
  EXPECT_EQ(std::vector<float>(p, p + 6), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  c.data<float>()[0] = 42.0f;  // a copy: the source is untouched
  EXPECT_EQ(t.item(0), 0.0);
}

TEST(Tensor, CopyFromAcrossDtypesRoundsToNearestEven) {
  MemoryLedger l;
  std::vector<float> vals = {1.0f,
                             1.00390625f /* bf16 tie → 1 */,
                             1.01171875f /* tie → up */,
                             -3.14159265f,
                             1e-20f,
                             65520.0f,
                             -0.0f,
                             3.0e38f,
                             1e-40f};
  Tensor a = Tensor::empty({static_cast<std::int64_t>(vals.size())}, DType::f32, {.ledger = &l});
  std::copy(vals.begin(), vals.end(), a.data<float>());
  Tensor b = a.to(DType::bf16, {.ledger = &l});
  Tensor back = b.to(DType::f32, {.ledger = &l});
  Tensor hf = a.to(DType::f16, {.ledger = &l});
  for (std::size_t i = 0; i < vals.size(); ++i) {
    EXPECT_EQ(b.data<bfloat16>()[i].bits, f32_to_bf16(vals[i])) << i;
    EXPECT_EQ(back.data<float>()[i], bf16_to_f32(f32_to_bf16(vals[i]))) << i;
    EXPECT_EQ(hf.data<float16>()[i].bits, f32_to_f16(vals[i])) << i;
  }
  EXPECT_EQ(back.item(1), 1.0);
  EXPECT_EQ(back.item(2), 1.015625);
  EXPECT_TRUE(std::isinf(hf.item(5)));

  // Into a strided (transposed) destination, converting on the way.
  Tensor m = iota({3, 5}, l);
  for (std::int64_t i = 0; i < 15; ++i)
    m.data<float>()[i] = 1.0f + static_cast<float>(i) / 256.0f + 1.0f / 512.0f;
  Tensor dst = Tensor::zeros({5, 3}, DType::bf16, {.ledger = &l});
  Tensor dst_t = dst.transpose(0, 1);  // shape [3, 5], strided
  dst_t.copy_from(m);
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < 5; ++c)
      EXPECT_EQ(dst.data<bfloat16>()[c * 3 + r].bits, f32_to_bf16(m.data<float>()[r * 5 + c]));

  EXPECT_THROW(dst.copy_from(m), Error);  // [5, 3] from [3, 5]
}

TEST(Tensor, CopyBetweenHostAndDeviceTiers) {
  MemoryLedger l;
  Tensor dev = iota({4, 8}, l);  // device tier (CPU backend)
  ASSERT_EQ(dev.tier(), Tier::device);
  Tensor host = dev.clone({.tier = Tier::host, .category = Category::optimizer, .ledger = &l});
  EXPECT_EQ(host.tier(), Tier::host);
  EXPECT_EQ(l.current(Tier::host, Category::optimizer), 128u);
  EXPECT_EQ(l.current(Tier::device, Category::other), 128u);
  EXPECT_NE(host.storage(), dev.storage());
  EXPECT_EQ(host.to_vector(), dev.to_vector());

  // Back to the device tier in a narrower dtype, then compare with the RNE of the source.
  Tensor back = host.to(DType::bf16, TensorOptions{.ledger = &l}.with(Category::params));
  EXPECT_EQ(back.tier(), Tier::device);
  EXPECT_EQ(l.current(Tier::device, Category::params), 64u);
  for (std::int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(back.item(i), bf16_to_f32(f32_to_bf16(static_cast<float>(i))));

  // Host-tier slice copied into a device-tier column view.
  Tensor col = dev.slice(1, 2, 3);
  col.copy_from(host.slice(1, 5, 6));
  for (std::int64_t r = 0; r < 4; ++r) EXPECT_EQ(dev.item(r * 8 + 2), r * 8 + 5.0);
}

TEST(Tensor, CudaTensorsWithoutAGpuThrow) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  MemoryLedger l;
  // Without CUDA compiled in this is a UserError; with CUDA but no GPU, a CUDA error.
  EXPECT_THROW(Tensor::empty({4}, DType::f32, {.device = Device::cuda(0), .ledger = &l}), Error);
  EXPECT_EQ(l.current(Tier::device), 0u);  // the failed allocation left no charge behind
}

TEST(Tensor, FillOnStridedViews) {
  MemoryLedger l;
  Tensor t = Tensor::zeros({4, 5}, DType::f32, {.ledger = &l});
  t.slice(1, 1, 2).fill(7.0);  // column 1
  t.select(3).fill(-1.0);      // last row
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t c = 0; c < 5; ++c) {
      const double want = r == 3 ? -1.0 : (c == 1 ? 7.0 : 0.0);
      EXPECT_EQ(t.item(r * 5 + c), want) << r << "," << c;
    }
  t.transpose(0, 1).slice(0, 3, 5).fill(2.5);  // columns 3 and 4, via a transposed view
  for (std::int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(t.item(r * 5 + 3), 2.5);
    EXPECT_EQ(t.item(r * 5 + 4), 2.5);
    EXPECT_EQ(t.item(r * 5 + 2), r == 3 ? -1.0 : 0.0);
  }
  t.slice(0, 0, 2).zero();
  for (std::int64_t i = 0; i < 10; ++i) EXPECT_EQ(t.item(i), 0.0);
  EXPECT_EQ(t.item(10 + 1), 7.0);

  // Half and integer dtypes: the fill value is rounded (RNE) or truncated once.
  Tensor b = Tensor::zeros({3, 4}, DType::bf16, {.ledger = &l});
  b.slice(1, 0, 2).fill(1.00390625);  // bf16 tie → 1.0
  EXPECT_EQ(b.item(0), 1.0);
  EXPECT_EQ(b.item(2), 0.0);
  b.fill(1.0 + 1.0 / 256 + 1.0 / (1 << 30));  // just above the tie → rounds up
  EXPECT_EQ(b.item(11), 1.0078125);
  Tensor h = Tensor::zeros({2, 2}, DType::f16, {.ledger = &l});
  h.transpose(0, 1).select(0).fill(1e9);
  EXPECT_TRUE(std::isinf(h.item(0)));
  EXPECT_TRUE(std::isinf(h.item(2)));
  EXPECT_EQ(h.item(1), 0.0);
  Tensor i = Tensor::zeros({3}, DType::i32, {.ledger = &l});
  i.fill(-2.9);
  EXPECT_EQ(i.item(2), -2.0);
}

TEST(Tensor, ItemWalksRowMajorOverAnyView) {
  MemoryLedger l;
  Tensor t = iota({2, 3, 4}, l);
  for (std::int64_t k = 0; k < 24; ++k) EXPECT_EQ(t.item(k), static_cast<double>(k));
  Tensor v = t.transpose(0, 2).slice(1, 1, 3);  // shape [4, 2, 2]: v[a][b][c] = t[c][b+1][a]
  ASSERT_EQ(v.shape(), (Shape{4, 2, 2}));
  for (std::int64_t a = 0; a < 4; ++a)
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t c = 0; c < 2; ++c)
        EXPECT_EQ(v.item(a * 4 + b * 2 + c), static_cast<double>(c * 12 + (b + 1) * 4 + a));
  EXPECT_THROW(t.item(24), Error);
  EXPECT_THROW(t.item(-1), Error);
  Tensor scalar = Tensor::empty(Shape{}, DType::i64, {.ledger = &l});
  scalar.fill(-5.0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.item(), -5.0);
  EXPECT_EQ(scalar.data<std::int64_t>()[0], -5);
}
