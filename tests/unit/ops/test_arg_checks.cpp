// The ops' argument checks. Table-driven from the harness's cases: for every call of every case,
// each operand in turn made wrong in shape (every extent + 1), dtype, layout (non-contiguous) or
// device (a CUDA tensor among CPU ones) must be refused with "[ops] <op>: ..." and the check's
// wording — before any backend touches memory. Then one row per check the mutations cannot
// produce, and Tensor::data<T>() of a tensor that is not in host memory.
#include <regex>
#include <set>

#include "framework/backend/ops/op_table.hpp"
#include "framework/backend/ops/ops.hpp"
#include "tests/unit/ops/op_entries.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

enum class Wrong { shape, dtype, layout, device };

// Each kind's name, and what the message must say for it (after "[ops] <op>: ").
struct WrongKind {
  Wrong w;
  const char* name;
  const char* wording;
};
constexpr WrongKind kWrong[] = {
    {Wrong::shape, "shape", "."},
    {Wrong::dtype, "dtype",
     "expected f32, bf16 or f16|must be a contiguous (f32|i32|u8) tensor|must be bf16 or f16"},
    {Wrong::layout, "layout", "is not contiguous|must be a contiguous (f32|i32|u8) tensor"},
    {Wrong::device, "device", "operands are on different devices"},
};

// Host memory that tensors on a "CUDA device" wrap: the ops must refuse them before reading it.
std::shared_ptr<Storage> fake_cuda_storage(std::size_t bytes) {
  auto* mem = new unsigned char[bytes];
  return Storage::wrap(mem, bytes, Device::cuda(0), [mem](void*) { delete[] mem; });
}

// A tensor like t (of spec s) but wrong in `w`.
Tensor make_wrong(const Tensor& t, const Spec& s, Wrong w) {
  switch (w) {
    case Wrong::shape: {
      std::vector<std::int64_t> dims = t.shape().dims();
      for (auto& d : dims) ++d;
      return Tensor::zeros(Shape(dims), t.dtype());
    }
    case Wrong::dtype: {
      const DType dt = s.group == 'i' || s.group == 'h' ? DType::f32
                       : s.group == 'f'                 ? DType::bf16
                                                        : DType::i32;
      return Tensor::zeros(t.shape(), dt);
    }
    case Wrong::layout: {  // every other element of a buffer twice as long
      std::vector<std::int64_t> strides = t.shape().contiguous_strides();
      for (auto& st : strides) st *= 2;
      const Tensor big = Tensor::zeros(Shape{2 * t.numel()}, t.dtype());
      return Tensor(big.storage(), t.dtype(), t.shape(), strides);
    }
    case Wrong::device:
      return Tensor(fake_cuda_storage(t.nbytes()), t.dtype(), t.shape(),
                    t.shape().contiguous_strides());
  }
  return t;
}

TEST(OpArgChecks, EveryOperandOfEveryOpIsCheckedForShapeDtypeLayoutAndDevice) {
  int checked = 0;
  std::set<std::string> ops_seen;
  for (const OpCase& c : all_cases()) {
    if (c.large) continue;
    const std::vector<Tensor> host = draw(c);
    const Combo combo = combos_of(c).front();
    std::vector<Tensor> good;
    for (std::size_t i = 0; i < host.size(); ++i)
      good.push_back(host[i].to(combo.of(c.tensors[i].group), TensorOptions{}));
    for (const Call& call : c.calls) {
      std::vector<Tensor> fresh;
      for (const Tensor& t : good) fresh.push_back(t.to(t.dtype(), TensorOptions{}));
      ASSERT_NO_THROW(call.run(fresh)) << c.name << ": " << call.op << " with good arguments";
      const std::set<int> args(call.args.begin(), call.args.end());
      for (int i : args) {
        const Spec& s = c.tensors[static_cast<std::size_t>(i)];
        for (const WrongKind& k : kWrong) {
          const Wrong w = k.w;
          if ((w == Wrong::shape || w == Wrong::device) && args.size() == 1)
            continue;  // any is fine
          if (w == Wrong::layout && s.shape.numel() < 2) continue;
          std::vector<Tensor> t = good;
          t[static_cast<std::size_t>(i)] = make_wrong(good[static_cast<std::size_t>(i)], s, w);
          const std::string what =
              c.name + ": " + call.op + " with " + s.name + " of the wrong " + k.name;
          try {
            call.run(t);
            ADD_FAILURE() << what << " was accepted";
          } catch (const Error& e) {
            const std::string msg = e.what();
            const std::string head = "[ops] " + call.op + ": ";
            EXPECT_EQ(msg.rfind(head, 0), 0u) << what << ": " << msg;
            EXPECT_TRUE(std::regex_search(msg.substr(std::min(head.size(), msg.size())),
                                          std::regex(k.wording)))
                << what << ": " << msg;
          }
          ++checked;
        }
      }
      ops_seen.insert(call.op);
    }
  }
  EXPECT_EQ(ops_seen.size(), op_entries().size()) << "an op without a (small) harness case";
  EXPECT_GT(checked, 300);
}

Tensor f32(Shape s) {
  return Tensor::zeros(s, DType::f32);
}
Tensor i32(Shape s) {
  return Tensor::zeros(s, DType::i32);
}

struct Row {
  const char* what;
  std::function<void()> call;
  const char* message;  // a regex the message must match from its start
};

TEST(OpArgChecks, ChecksTheMutationsCannotReach) {
  const optim::AdamWHyper adamw;
  optim::SGDHyper sgd_momentum;
  sgd_momentum.momentum = 0.9;
  Tensor tokens = i32(Shape{1, 2});
  tokens.data<std::int32_t>()[1] = 11;
  const std::vector<Row> rows = {
      {"inner extents",
       [] {
         matmul(f32({2, 3}), f32({4, 5}), f32({2, 5}));
       },
       R"(\[ops\] matmul: inner extents differ: op\(A\) is \[2, 3\], op\(B\) is \[4, 5\])"},
      {"heads",
       [] {
         attention_forward(f32({1, 2, 30}), f32({1, 2, 10}), f32({8}), 4);
       },
       R"(\[ops\] attention_forward: qkv \[1, 2, 30\] is not \[B, T, 3C\] with C divisible by 4 heads)"},
      {"undefined",
       [] {
         linear_forward(Tensor(), f32({2, 2}), Tensor(), f32({2, 2}));
       },
       R"(\[ops\] linear_forward: x is undefined)"},
      {"step",
       [&] { adamw_step(f32({4}), f32({4}), f32({4}), f32({4}), adamw, 0, 1.0f, Tensor()); },
       R"(\[ops\] adamw_step: step 0 must be >= 1)"},
      {"missing momentum",
       [&] { sgd_step(f32({4}), f32({4}), Tensor(), sgd_momentum, 1, 1.0f, Tensor()); },
       R"(\[ops\] sgd_step: momentum must be a contiguous f32 tensor \(it is undefined\))"},
      {"param16 f32",
       [&] { adamw_step(f32({4}), f32({4}), f32({4}), f32({4}), adamw, 1, 1.0f, f32({4})); },
       R"(\[ops\] adamw_step: param16 must be bf16 or f16)"},
      {"vocab_start",
       [] {
         target_logit(f32({2, 3}), i32({2}), -1, f32({2}));
       },
       R"(\[ops\] target_logit: negative vocab_start -1)"},
      {"combine: lse of another length",
       [] { combine_cross_entropy(f32({3}), f32({3}), f32({3}), i32({3}), f32({2})); },
       R"(\[ops\] combine_cross_entropy: lse has 2 elements \(\[2\]\), expected 3)"},
      {"combine: targets not i32",
       [] { combine_cross_entropy(f32({3}), f32({3}), f32({3}), f32({3}), f32({3})); },
       R"(\[ops\] combine_cross_entropy: targets must be a contiguous i32 tensor \(it is f32 \[3\]\))"},
      {"cross_entropy: a sum of two elements",
       [] { cross_entropy_forward(f32({3, 4}), i32({3}), f32({3}), Tensor::zeros(Shape{2}, DType::f64)); },
       R"(\[ops\] cross_entropy_forward: sum has 2 elements \(\[2\]\), expected 1)"},
      {"cross_entropy: an f32 sum",
       [] { cross_entropy_forward(f32({3, 4}), i32({3}), f32({3}), f32({1})); },
       R"(\[ops\] cross_entropy_forward: sum must be a contiguous f64 tensor)"},
      {"cross_entropy: a sum on another device",
       [] {
         cross_entropy_forward(f32({3, 4}), i32({3}), f32({3}),
                               Tensor(fake_cuda_storage(8), DType::f64, Shape{1}, {1}));
       },
       R"(\[ops\] cross_entropy_forward: operands are on different devices)"},
      {"combine: a sum of no element",
       [] {
         combine_cross_entropy(f32({3}), f32({3}), f32({3}), i32({3}), f32({3}),
                               Tensor::zeros(Shape{0}, DType::f64));
       },
       R"(\[ops\] combine_cross_entropy: sum has 0 elements \(\[0\]\), expected 1)"},
      {"cross_entropy: a target outside the vocabulary",
       [] {
         Tensor t = i32({3});
         t.data<std::int32_t>()[2] = 4;
         cross_entropy_forward(f32({3, 4}), t, f32({3}));
       },
       R"(\[cpu\] cross_entropy: target 4 of row 2 is outside the vocabulary of 4)"},
      {"token outside the vocabulary",
       [&] {
         embedding_forward(tokens, f32({11, 4}), f32({2, 4}), f32({2, 4}));
       },
       R"(\[ops\] embedding_forward: token 11 at position 1 is outside the vocabulary \[0, 11\))"},
      {"token outside the vocabulary (backward)",
       [&] {
         embedding_backward(tokens, f32({2, 4}), f32({11, 4}), Tensor());
       },
       R"(\[ops\] embedding_backward: token 11 at position 1 is outside the vocabulary \[0, 11\))"},
      {"tokens rank",
       [] {
         embedding_forward(i32({2}), f32({3, 4}), f32({2, 4}), f32({2, 4}));
       },
       R"(\[ops\] embedding_forward: tokens \[2\] must be \[B, T\])"},
  };
  for (const Row& r : rows) {
    try {
      r.call();
      ADD_FAILURE() << r.what << ": accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(std::regex_search(e.what(), std::regex(std::string("^") + r.message)))
          << r.what << ": " << e.what();
    }
  }
}

TEST(OpArgChecks, OperandsAllOnADeviceWithoutAnOpTableAreAUserError) {
  if (cuda_op_table()) GTEST_SKIP() << "this build has a CUDA op table";
  const Tensor x(fake_cuda_storage(16), DType::f32, Shape{4}, {1});
  try {
    scale_inplace(x, 2.0f);
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    EXPECT_TRUE(std::regex_search(
        e.what(),
        std::regex(R"(^\[ops\] a tensor is on cuda:0 but this Strata build has no CUDA)")))
        << e.what();
  }
}

TEST(OpArgChecks, HostAccessToATensorOnAnotherDeviceThrows) {
  const Tensor x(fake_cuda_storage(16), DType::f32, Shape{4}, {1});
  EXPECT_NE(x.raw(), nullptr);  // the device address itself is available to a backend
  try {
    (void)x.data<float>();
    ADD_FAILURE() << "data<float>() of a cuda tensor was allowed";
  } catch (const Error& e) {
    EXPECT_TRUE(
        std::regex_search(e.what(), std::regex(R"(^\[core\] data<f32>\(\) of a tensor on cuda:0)")))
        << e.what();
  }
  EXPECT_THROW((void)x.data<std::int32_t>(), Error);  // wrong dtype too
}

}  // namespace
}  // namespace strata::ops::test
