// The op harness's machinery: dtype combinations, drawing a case's tensors, running its calls on a
// backend and on the f32 CPU reference, and comparing (op_harness.hpp has the tolerances).
#include "tests/unit/ops/op_harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "framework/core/half.hpp"

namespace strata::ops::test {
namespace {

constexpr DType kFloat[] = {DType::f32, DType::bf16, DType::f16};

std::uint32_t fnv1a(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char ch : s) h = (h ^ ch) * 16777619u;
  return h;
}

// x rounded to nearest even in dtype dt (f32: itself).
float round_to(DType dt, float x) {
  if (dt == DType::bf16) return bf16_to_f32(f32_to_bf16(x));
  if (dt == DType::f16) return f16_to_f32(f32_to_f16(x));
  return x;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace

DType Combo::of(char group) const {
  if (group == 'i') return DType::i32;
  if (group == 'u') return DType::u8;
  const auto it = dtype.find(group);
  return it == dtype.end() ? DType::f32 : it->second;
}

std::vector<Combo> standard_combos() {
  return {{"f32", {}},
          {"bf16_act", {{'a', DType::bf16}}},
          {"f16_act", {{'a', DType::f16}}},
          {"bf16", {{'a', DType::bf16}, {'p', DType::bf16}}},
          {"f16", {{'a', DType::f16}, {'p', DType::f16}}}};
}

std::vector<Combo> product_combos(const std::string& groups) {
  std::vector<Combo> out(1, Combo{"", {}});
  for (char g : groups) {
    std::vector<Combo> next;
    for (const Combo& c : out) {
      for (DType dt : kFloat) {
        Combo n = c;
        n.dtype[g] = dt;
        n.name = fmt::format("{}{}{}{}", n.name, n.name.empty() ? "" : "_", g, dtype_name(dt));
        next.push_back(std::move(n));
      }
    }
    out = std::move(next);
  }
  return out;
}

std::vector<Combo> combos_of(const OpCase& c) {
  std::vector<Combo> out;
  std::set<std::vector<DType>> seen;
  for (const Combo& combo : c.combos.empty() ? standard_combos() : c.combos) {
    std::vector<DType> key;
    for (const Spec& s : c.tensors) key.push_back(combo.of(s.group));
    if (seen.insert(key).second) out.push_back(combo);
  }
  return out;
}

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    for (auto list : {dense_cases, layer_cases, loss_cases, elementwise_cases, optimizer_cases,
                      shard_sum_cases, attention_cases})
      for (OpCase& c : list()) all.push_back(std::move(c));
    return all;
  }();
  return cases;
}

const OpCase& find_case(const std::string& name) {
  for (const OpCase& c : all_cases())
    if (c.name == name) return c;
  throw std::runtime_error("no op case named " + name);
}

std::string cuda_skip_reason() {
  if (!ops::cuda_op_table())
    return cuda::compiled() ? "this build has no CUDA op table (cuda_op_table() is nullptr)"
                            : "this build has no CUDA support";
  if (cuda::device_count() == 0) return "no GPU is visible: " + cuda::describe_devices();
  return "";
}

const std::vector<Backend>& registered_backends() {
  static const std::vector<Backend> list = {
      {"cpu", Device::cpu(), [] { return std::string(); }},
      {"cuda", Device::cuda(0), cuda_skip_reason},
  };
  return list;
}

const Backend& backend_named(const std::string& name) {
  for (const Backend& b : registered_backends())
    if (b.name == name) return b;
  throw std::runtime_error("no backend named " + name);
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const Backend& b : registered_backends()) names.push_back(b.name);
  return names;
}

std::vector<BackendDType> backend_dtype_params() {
  std::vector<BackendDType> out;
  for (const Backend& b : registered_backends())
    for (DType dt : kFloat) out.emplace_back(b.name, dt);
  return out;
}

std::string backend_dtype_name(const ::testing::TestParamInfo<BackendDType>& info) {
  return backend_param_name(std::get<0>(info.param),
                            std::string(dtype_name(std::get<1>(info.param))));
}

std::vector<Tensor> draw(const OpCase& c) {
  std::vector<Tensor> t;
  const std::uint32_t seed = fnv1a(c.name);
  for (std::size_t i = 0; i < c.tensors.size(); ++i) {
    const Spec& s = c.tensors[i];
    std::mt19937 gen(seed + 7919u * static_cast<std::uint32_t>(i));
    const std::int64_t n = s.shape.numel();
    if (s.group == 'i') {
      STRATA_CHECK(s.init.kind == Init::Kind::tokens, "test", "{}: i32 tensor {} needs tokens()",
                   c.name, s.name);
      Tensor x = Tensor::empty(s.shape, DType::i32);
      std::uniform_int_distribution<int> d(0, static_cast<int>(s.init.a) - 1);
      std::int32_t* p = x.data<std::int32_t>();
      for (std::int64_t k = 0; k < n; ++k) {
        p[k] = d(gen);
        if (s.init.ignore_every > 0 && k % s.init.ignore_every == 1) p[k] = -1;
      }
      t.push_back(x);
      continue;
    }
    if (s.group == 'u') {  // bytes (8-bit optimizer codes), uniform in [0, a)
      STRATA_CHECK(s.init.kind == Init::Kind::tokens, "test", "{}: u8 tensor {} needs tokens()",
                   c.name, s.name);
      Tensor x = Tensor::empty(s.shape, DType::u8);
      std::uniform_int_distribution<int> d(0, static_cast<int>(s.init.a) - 1);
      auto* p = x.data<std::uint8_t>();
      for (std::int64_t k = 0; k < n; ++k) p[k] = static_cast<std::uint8_t>(d(gen));
      t.push_back(x);
      continue;
    }
    Tensor x = Tensor::empty(s.shape, DType::f32);
    float* p = x.data<float>();
    switch (s.init.kind) {
      case Init::Kind::normal: {
        std::normal_distribution<float> d(0.0f, static_cast<float>(s.init.a));
        for (std::int64_t k = 0; k < n; ++k) p[k] = d(gen) + static_cast<float>(s.init.b);
        break;
      }
      case Init::Kind::uniform: {
        std::uniform_real_distribution<float> d(static_cast<float>(s.init.a),
                                                static_cast<float>(s.init.b));
        for (std::int64_t k = 0; k < n; ++k) p[k] = d(gen);
        break;
      }
      case Init::Kind::unset:
        std::fill_n(p, n, std::numeric_limits<float>::quiet_NaN());
        break;
      case Init::Kind::tokens:
        STRATA_CHECK(false, "test", "{}: float tensor {} cannot hold tokens()", c.name, s.name);
    }
    for (const auto& [k, v] : s.init.plant) p[k] = v;
    t.push_back(x);
  }
  if (c.prepare) c.prepare(t);
  return t;
}

Tensor to_host(const Tensor& t) {
  if (!t.defined() || t.device().is_cpu()) return t;
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  h.copy_from(t);
  return h;
}

Tensor on_device(const Tensor& h, DType dt, Device device) {
  Tensor cpu = h.to(dt, TensorOptions{});
  if (device.is_cpu()) return cpu;
  Tensor d = Tensor::empty(h.shape(), dt, TensorOptions{device});
  d.copy_from(cpu);
  return d;
}

::testing::AssertionResult matches_reference(const Tensor& got, const Tensor& ref, double rtol) {
  if (got.shape() != ref.shape())
    return ::testing::AssertionFailure()
           << "shape " << got.shape().str() << " vs reference " << ref.shape().str();
  const std::vector<float> g = got.to_vector(), r = ref.to_vector();
  float scale = 0.0f;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (std::isnan(r[i]))
      return ::testing::AssertionFailure()
             << "the reference is NaN at element " << i << " (an output left unwritten?)";
    if (std::isfinite(r[i])) scale = std::max(scale, std::abs(r[i]));
  }
  const float delta = static_cast<float>(rtol * scale);
  const DType dt = got.dtype();
  // The bound on element i: [r - delta, r + delta], each end rounded to dt.
  auto bound = [&](std::size_t i) {
    return std::pair{round_to(dt, r[i] - delta), round_to(dt, r[i] + delta)};
  };
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (g[i] == r[i] || (dt == DType::f32 && std::abs(g[i] - r[i]) <= delta)) continue;  // ±inf too
    if (dt != DType::f32 && g[i] == round_to(dt, r[i])) continue;
    const auto [lo, hi] = bound(i);
    if (lo <= g[i] && g[i] <= hi) continue;  // false for NaN
    if (bad++ == 0) first = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const auto [lo, hi] = bound(first);
  return ::testing::AssertionFailure()
         << bad << " of " << r.size() << " elements (" << dtype_name(dt)
         << ") outside the bound; first at " << first << ": got " << g[first] << ", reference "
         << r[first] << ", allowed [" << lo << ", " << hi << "] (rtol " << rtol << " x max|ref| "
         << scale << ")";
}

int check_case(const OpCase& c, const std::vector<Tensor>& host, const Combo& combo,
               const Backend& backend) {
  const std::size_t n = c.tensors.size();
  std::vector<Tensor> test(n), ref(n), initial(n);
  std::set<int> written;
  for (const Call& call : c.calls) {
    for (int o : call.outputs) {
      EXPECT_TRUE(std::find(call.args.begin(), call.args.end(), o) != call.args.end())
          << c.name << ": " << call.op << " writes tensor " << o << " that it does not take";
      written.insert(o);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Spec& s = c.tensors[i];
    const DType dt = combo.of(s.group);
    initial[i] = host[i].to(dt, TensorOptions{});  // rounded to the combination's dtype
    test[i] = on_device(initial[i], dt, backend.device);
    if (s.copy_of < 0)
      ref[i] = initial[i].to(s.group == 'i'   ? DType::i32
                             : s.group == 'u' ? DType::u8
                                              : DType::f32,
                             TensorOptions{});
  }
  const bool other = !backend.device.is_cpu();
  int compared = 0;
  for (const Call& call : c.calls) {
    SCOPED_TRACE(call.op);
    const double want = call.run(ref);
    const double got = call.run(test);
    for (int o : call.outputs) {
      const Spec& s = c.tensors[static_cast<std::size_t>(o)];
      const Tensor& r = s.copy_of >= 0 ? ref[static_cast<std::size_t>(s.copy_of)]
                                       : ref[static_cast<std::size_t>(o)];
      const double rtol =
          other ? std::max({call.tol.rtol, call.tol.other_rtol, kOtherBackendRtol}) : call.tol.rtol;
      EXPECT_TRUE(matches_reference(to_host(test[static_cast<std::size_t>(o)]), r, rtol))
          << "output " << s.name;
      ++compared;
    }
    if (call.scalar) {
      const double rtol =
          other ? std::max(call.tol.scalar_rtol, kOtherBackendRtol * 0.1) : call.tol.scalar_rtol;
      if (call.expect) {
        EXPECT_EQ(want, *call.expect) << "the reference's result";
        EXPECT_EQ(got, *call.expect) << "the result";
      } else {
        EXPECT_LE(std::abs(got - want), rtol * std::max(1.0, std::abs(want)))
            << "the result " << got << " vs the reference's " << want;
      }
      ++compared;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (written.count(static_cast<int>(i))) continue;
    EXPECT_TRUE(same_bytes(to_host(test[i]), initial[i]))
        << c.tensors[i].name << " is not an output but changed";
  }
  return compared;
}

}  // namespace strata::ops::test
