// The op test harness (in the style of ggml's test-backend-ops): every op is one registered case
// — its tensors (shapes, dtype group, value ranges), the ops:: calls that run it (the op, then its
// backward for differentiable ops) and the dtype combinations that matter — and is run on every
// backend whose op table exists against the reference: the same calls on the CPU with every
// tensor widened exactly to f32 (the reference sees the very numbers the backend saw).
//
// Tolerances, for each output against the reference's value r (S = max |r| over the output,
// delta = rtol * S, rtol declared per call; 0 means "bitwise"):
//   f32 output:    |got - r| <= delta.
//   16-bit output: got lies in [rne(r - delta), rne(r + delta)], rne = round to nearest even in
//                  the output's dtype: the correctly rounded result of a value within delta of
//                  the reference, i.e. at most half an ulp of r plus delta (delta = 0: got ==
//                  rne(r) exactly). Every CPU op computes in f32 and rounds a 16-bit output once.
// A backend other than the CPU gets at least kOtherBackendRtol (its kernels sum in other orders),
// and at least a call's Tol::other_rtol.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "framework/core/tensor.hpp"

namespace strata {
// gtest prints a DType parameter by name (in test names ctest shows), not as a byte.
inline void PrintTo(DType dt, std::ostream* os) {
  *os << dtype_name(dt);
}
}  // namespace strata

namespace strata::ops::test {

inline constexpr double kOtherBackendRtol = 1e-5;

using Tensors = std::vector<Tensor>;

// How a tensor's values are drawn (as f32 before rounding to the tensor's dtype, or as i32).
struct Init {
  enum class Kind { normal, uniform, tokens, unset } kind = Kind::normal;
  double a = 1.0, b = 0.0;  // normal: scale a, mean b; uniform: [a, b); tokens: [0, a)
  int ignore_every = 0;     // tokens: every k-th element (from the second) is -1: an ignored row
  std::vector<std::pair<std::int64_t, float>> plant;  // values set after drawing (inf, NaN, ...)
};
inline Init make_init(Init::Kind kind, double a = 1.0, double b = 0.0, int ignore_every = 0) {
  Init i;
  i.kind = kind;
  i.a = a;
  i.b = b;
  i.ignore_every = ignore_every;
  return i;
}
inline Init normal(double scale = 1.0, double mean = 0.0) {
  return make_init(Init::Kind::normal, scale, mean);
}
inline Init uniform(double lo, double hi) {
  return make_init(Init::Kind::uniform, lo, hi);
}
// i32 values in [0, V); with ignore_every = k, elements 1, 1+k, 1+2k, ... are -1.
inline Init tokens(int V, int ignore_every = 0) {
  return make_init(Init::Kind::tokens, V, 0.0, ignore_every);
}
// An output the op must overwrite: NaN everywhere, so an element left unwritten is caught.
inline Init unset() {
  return make_init(Init::Kind::unset);
}
inline Init planted(Init base, std::vector<std::pair<std::int64_t, float>> values) {
  base.plant = std::move(values);
  return base;
}

// One tensor of a case. `group` chooses its dtype in each combination: 'a' activations (and their
// gradients), 'p' parameters (and theirs), 'f' always f32 (lse, mean, rstd, optimizer state),
// 'i' always i32, 'u' always u8 (8-bit optimizer codes, drawn by tokens(256)); other letters are
// groups a case's own combinations name.
struct Spec {
  Spec(std::string n, Shape s, char g, Init i, int copy = -1)
      : name(std::move(n)), shape(std::move(s)), group(g), init(std::move(i)), copy_of(copy) {}
  std::string name;
  Shape shape;
  char group = 'a';
  Init init;
  // A 16-bit copy of output `copy_of` (adamw's param16): the reference passes it undefined and
  // expects it equal to its `copy_of` output rounded to this tensor's dtype.
  int copy_of = -1;
};

// A dtype for every group it names; groups it does not name are f32 ('i' is always i32).
struct Combo {
  std::string name;
  std::map<char, DType> dtype;
  DType of(char group) const;
};

// How close a call's results must be to the reference's, on the CPU and on other backends.
struct Tol {
  double rtol = 0.0;         // relative to max |reference| of the output; 0 = bitwise on the CPU
  double scalar_rtol = 0.0;  // the call's scalar result, relative to max(1, |reference|)
  // The outputs' rtol on a backend other than the CPU, when its kernels compute differently from
  // the CPU's by design (the rounded attention), leaving the CPU's own check as rtol says.
  double other_rtol = 0.0;
};

// One ops:: call: `op` as the op's error messages name it, the tensors it takes (indices into the
// case's tensors, in order) and those it writes, and the function that makes the call (returning
// the op's scalar result, if any).
struct Call {
  Call(std::string o, std::vector<int> a, std::vector<int> out,
       std::function<double(const Tensors&)> r)
      : op(std::move(o)), args(std::move(a)), outputs(std::move(out)), run(std::move(r)) {}
  std::string op;
  std::vector<int> args;
  std::vector<int> outputs;
  std::function<double(const Tensors&)> run;
  bool scalar = false;           // compare run's return value
  std::optional<double> expect;  // and that value, exactly (has_inf_or_nan)
  Tol tol;
};

// A call of an op that returns nothing, and of one whose scalar result is compared.
template <class F>
Call effect(std::string op, std::vector<int> args, std::vector<int> outputs, F f) {
  return Call(std::move(op), std::move(args), std::move(outputs), [f](const Tensors& t) {
    f(t);
    return 0.0;
  });
}
template <class F>
Call scalar_call(std::string op, std::vector<int> args, std::vector<int> outputs, F f) {
  Call c(std::move(op), std::move(args), std::move(outputs), f);
  c.scalar = true;
  return c;
}

struct OpCase {
  std::string name;
  std::vector<Spec> tensors;
  std::vector<Call> calls;    // the op, then its backward; none reads another's outputs
  std::vector<Combo> combos;  // empty: standard_combos()
  // Derives inputs from others after drawing (f32 values on the CPU, before any rounding): the
  // saved lse/mean/rstd/out a backward takes.
  std::function<void(const Tensors&)> prepare;
  bool large = false;  // big enough to cross the CPU table's row blocks
  // Why only the CPU (and meta) tables have kernels for it ("" = every backend): the other
  // backends' tests skip, saying so.
  std::string cpu_only;
};

// A case from its parts, in OpCase's order.
inline OpCase op_case(std::string name, std::vector<Spec> tensors, std::vector<Call> calls,
                      std::vector<Combo> combos = {},
                      std::function<void(const Tensors&)> prepare = {}) {
  OpCase c;
  c.name = std::move(name);
  c.tensors = std::move(tensors);
  c.calls = std::move(calls);
  c.combos = std::move(combos);
  c.prepare = std::move(prepare);
  return c;
}

// f32; 16-bit activations with f32 parameters (bf16, f16); 16-bit everything (bf16, f16).
std::vector<Combo> standard_combos();
// Every assignment of {f32, bf16, f16} to each of `groups` (3^n combinations).
std::vector<Combo> product_combos(const std::string& groups);
// The combinations a case runs: its own or the standard ones, without those that give every
// tensor the same dtypes as an earlier one.
std::vector<Combo> combos_of(const OpCase& c);

// Every registered case (the cases_*.cpp files), and one by name.
const std::vector<OpCase>& all_cases();
const OpCase& find_case(const std::string& name);
std::vector<OpCase> dense_cases();
std::vector<OpCase> layer_cases();
std::vector<OpCase> loss_cases();
std::vector<OpCase> elementwise_cases();
std::vector<OpCase> optimizer_cases();
std::vector<OpCase> shard_sum_cases();
std::vector<OpCase> attention_cases();

// A backend the harness tests. Every harness case, dtype combination and semantics check runs
// once per registered backend, as a test whose parameter starts with the backend's name
// ("cuda_matmul_nn"; tests/CMakeLists.txt labels the cuda_* ones `cuda`); an unavailable backend's
// tests skip, saying why. A new backend plugs in by adding its entry to registered_backends().
struct Backend {
  std::string name;  // "cpu", "cuda"
  Device device;
  std::string (*unavailable)();  // why it cannot be tested here; "" when it can
};
// CPU (always available), then CUDA device 0 (when the build has a CUDA op table and a GPU).
const std::vector<Backend>& registered_backends();
const Backend& backend_named(const std::string& name);
std::vector<std::string> backend_names();
// Why the CUDA backend is not tested here ("" when it is).
std::string cuda_skip_reason();
// Skips the running test when `backend` is unavailable, with the reason.
#define STRATA_SKIP_UNLESS_AVAILABLE(backend)                                        \
  if (const std::string strata_why_ = (backend).unavailable(); !strata_why_.empty()) \
  GTEST_SKIP() << (backend).name << " backend not tested: " << strata_why_
// "<backend>_<rest>": a test parameter's name, starting with its backend's.
inline std::string backend_param_name(const std::string& backend, const std::string& rest) {
  return backend + "_" + rest;
}
// (backend name, dtype): the parameter of the tests that check one backend with one float dtype;
// every registered backend with f32, bf16 and f16, named "<backend>_<dtype>".
using BackendDType = std::tuple<std::string, DType>;
std::vector<BackendDType> backend_dtype_params();
std::string backend_dtype_name(const ::testing::TestParamInfo<BackendDType>& info);

// The case's tensors drawn on the CPU (f32 or i32) and prepared, seeded by the case's name.
Tensors draw(const OpCase& c);
// A copy of a tensor in host memory (itself when it already is).
Tensor to_host(const Tensor& t);
// A copy of host tensor `h` as dtype `dt` on `device`.
Tensor on_device(const Tensor& h, DType dt, Device device);

// Compares an output with its reference as the header describes.
::testing::AssertionResult matches_reference(const Tensor& got, const Tensor& ref, double rtol);

// Runs every call of case `c` in combination `combo` on `backend` and on the reference, checking
// each output and scalar (gtest failures) and that no tensor outside the outputs changed; `host`
// is draw(c). Returns the number of comparisons made.
int check_case(const OpCase& c, const Tensors& host, const Combo& combo, const Backend& backend);

}  // namespace strata::ops::test
