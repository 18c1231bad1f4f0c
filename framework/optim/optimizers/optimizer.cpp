#include "framework/optim/optimizers/optimizer.hpp"

#include <algorithm>
#include <optional>

#include "framework/core/convert.hpp"
#include "framework/optim/optimizers/registry.hpp"
#include "framework/train/grad_view.hpp"

namespace strata::optim {

// ---- UnitSlice ----

void UnitSlice::for_each_param(
    const std::function<void(std::int64_t, std::int64_t, const nn::Parameter&)>& f) const {
  const nn::UnitLayout& l = *layout;
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    // The part of parameter i inside the owned range, as offsets into the owned slice.
    const std::int64_t a = std::max(l.lo, l.offsets[i]);
    const std::int64_t b = std::min(l.hi, l.offsets[i] + l.params[i]->shape.numel());
    if (a < b) f(a - l.lo, b - l.lo, *l.params[i]);
  }
}

const float* UnitSlice::f32_grad(Tensor& keep) const {
  const std::size_t n = train::owned_numel(*layout);
  if (grad.dtype() != DType::f32)
    keep = Tensor::empty(Shape{static_cast<std::int64_t>(n)}, DType::f32, workspace);
  if (meta()) return nullptr;
  if (grad.dtype() == DType::f32) return grad.data<float>();
  convert(grad.raw(), grad.dtype(), keep.raw(), DType::f32, n);
  return keep.data<float>();
}

// ---- the unit loop ----

double UnitStepOptimizer::step(StepContext& ctx, const StepArgs& a) {
  update_units(ctx, [&](UnitSlice& s) { update_unit(s, a); });
  return a.lr;
}

namespace {
// The padding after the parameters in an owned slice acquired to be overwritten: the update
// writes only [0, owned), so the rest is set to zeros as a read slice would hold.
void zero_padding(const Tensor& shard, std::size_t owned) {
  const auto n = static_cast<std::int64_t>(owned);
  if (!shard.device().is_meta() && n < shard.numel()) shard.slice(0, n, shard.numel()).zero();
}
}  // namespace

void update_unit_of(StepContext& ctx, std::size_t u, const Tensor* grad,
                    const std::function<void(UnitSlice&)>& f) {
  nn::ParamStore& store = ctx.store;
  const DType pd = store.options().param_dtype;
  // With f32 masters in the optimizer state, the 16-bit slice is only written: an offloaded
  // store does not read it first.
  const bool overwrite = pd != DType::f32;
  const nn::UnitLayout& l = store.layout(u);
  train::UnitOptimizerState& st = ctx.states.acquire(u);
  // Written back when finished (staged: copied to the store's slice; offloaded: released dirty).
  ValueSlice held(store, ctx.staging, u, /*dirty=*/true, overwrite);
  const Tensor& vshard = held.get();
  if (overwrite) zero_padding(vshard, train::owned_numel(l));
  std::optional<nn::GradShardScope> acquired;
  if (!grad) acquired.emplace(store, u, /*dirty=*/false);
  UnitSlice s;
  s.unit = u;
  s.layout = &l;
  s.state = &st;
  s.master = pd == DType::f32 ? vshard : st.master;
  if (pd != DType::f32) s.param16 = vshard;
  s.grad = grad ? *grad : acquired->get();
  // The update runs where its state is: its gradients must be there too (offloaded with it).
  STRATA_CHECK(!ctx.staging || s.grad.tier() == (ctx.staging->state_on_host() ? Tier::host : Tier::device),
               "optim", "unit {}: the gradients are in {} memory but the optimizer state in {}",
               u, tier_name(s.grad.tier()), ctx.staging->state_on_host() ? "host" : "device");
  s.workspace = store.options().memory.with(Category::workspace);
  f(s);
  held.finish();
  ctx.states.release(u, true);
}

void update_units(StepContext& ctx, const std::function<void(UnitSlice&)>& f) {
  ctx.store.expect_value_shards_in_order(ctx.store.options().param_dtype != DType::f32);
  ctx.store.expect_grad_shards_in_order();
  for (std::size_t u = 0; u < ctx.store.num_units(); ++u) update_unit_of(ctx, u, nullptr, f);
}

void meta_pass(StepContext& ctx, const std::vector<std::int64_t>& workspace) {
  nn::ParamStore& store = ctx.store;
  const TensorOptions work = store.options().memory.with(Category::workspace);
  std::vector<Tensor> held;
  for (std::int64_t n : workspace) held.push_back(Tensor::empty(Shape{n}, DType::f32, work));
  store.expect_value_shards_in_order();
  store.expect_grad_shards_in_order();
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    ctx.states.acquire(u);
    ValueSlice values(store, ctx.staging, u, /*dirty=*/true);
    const nn::GradShardScope g(store, u, /*dirty=*/false);
    // The f32 copy of a 16-bit gradient that the host kernels read.
    if (g.get().dtype() != DType::f32)
      Tensor::empty(Shape{static_cast<std::int64_t>(train::owned_numel(store.layout(u)))},
                    DType::f32, work);
    values.finish();
    ctx.states.release(u, true);
  }
}

// ---- the declarations, read ----

std::vector<ParamGeometry> param_geometry(const nn::UnitLayout& l) {
  std::vector<ParamGeometry> out;
  std::int64_t fac = 0, v = 0;
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    const Shape& shape = l.params[i]->shape;
    ParamGeometry p;
    p.index = i;
    p.offset = l.offsets[i];
    p.numel = shape.numel();
    p.matrix = shape.rank() >= 2 && p.numel > 0;
    p.a = std::max(l.lo, p.offset);
    p.b = std::min(l.hi, p.offset + p.numel);
    if (p.matrix) {
      p.rows = shape.dims()[0];
      p.cols = p.numel / p.rows;
      p.fac = fac;
      fac += p.rows + p.cols;
    } else if (p.a < p.b) {
      p.v = v;
      v += p.b - p.a;
    }
    out.push_back(p);
  }
  return out;
}

std::vector<ErrorSlot> error_slots(const Declaration& d, const nn::ParamStore& store, std::size_t u,
                                   int ranks) {
  const auto it = std::find_if(d.state.begin(), d.state.end(),
                               [](const StateTensor& t) { return t.shape == StateShape::rank_errors; });
  if (it == d.state.end()) return {};
  const nn::UnitLayout& l = store.layout(u);
  std::vector<ErrorSlot> out;
  if (it->count == 1) {
    // One tensor of every parameter: its errors sit on the first unit with parameters, on its
    // first parameter.
    out.resize(l.params.size());
    std::size_t first = 0;
    while (first < store.num_units() && store.layout(first).params.empty()) ++first;
    if (u == first && !out.empty()) {
      std::size_t n = 0;
      for (std::size_t v = 0; v < store.num_units(); ++v)
        n += static_cast<std::size_t>(store.layout(v).numel);
      out[0] = {0, static_cast<std::int64_t>(onebit_padded_size(n, ranks)),
                static_cast<std::int64_t>(onebit_error_size(n, ranks))};
    }
    return out;
  }
  std::int64_t at = 0;
  for (const nn::Parameter* p : l.params) {
    const auto n = static_cast<std::size_t>(p->shape.numel());
    const auto padded = static_cast<std::int64_t>(onebit_padded_size(n, ranks));
    const auto size = static_cast<std::int64_t>(onebit_error_size(n, ranks));
    out.push_back({at, at + padded, size});
    at += size;
  }
  return out;
}

train::StateLayout unit_state_layout(const Declaration& d, const nn::ParamStore& store,
                                     std::size_t u, int ranks) {
  const nn::UnitLayout& l = store.layout(u);
  train::StateLayout out;
  out.elements = l.hi - l.lo;
  out.master = store.options().param_dtype != DType::f32;
  std::vector<ParamGeometry> geometry;
  for (const StateTensor& t : d.state) {
    std::int64_t n = 0;
    switch (t.shape) {
      case StateShape::elements: n = out.elements; break;
      case StateShape::blocks: n = block_count(out.elements, t.count); break;
      case StateShape::vectors:
      case StateShape::factored:
        if (geometry.empty()) geometry = param_geometry(l);
        for (const ParamGeometry& p : geometry) {
          if (t.shape == StateShape::factored && p.matrix) n += p.rows + p.cols;
          if (t.shape == StateShape::vectors && !p.matrix && p.a < p.b) n += p.b - p.a;
        }
        break;
      case StateShape::per_param: n = t.count * static_cast<std::int64_t>(l.params.size()); break;
      case StateShape::rank_errors:
        for (const ErrorSlot& e : error_slots(d, store, u, ranks)) n += e.size;
        break;
    }
    out.tensors.push_back({t.dtype, n});
  }
  return out;
}

int state_pad_multiple(const Declaration& d, int shard_count) {
  std::int64_t block = 1;
  for (const StateTensor& t : d.state)
    if (t.shape == StateShape::blocks) block = std::max(block, t.count);
  return block > 1 ? static_cast<int>(block) * std::max(shard_count, 1) : 1;
}

std::string optimizer_names(const std::function<bool(const Declaration&)>& keep,
                            std::string_view conjunction) {
  std::vector<std::string> names;
  for (const OptimizerEntry& e : registered_optimizers()) {
    // The object owns its declaration: keep it alive while d is read (a temporary here was a
    // heap-use-after-free, found by ThreadSanitizer in tensor_dist_np2).
    const auto made = e.make(config::Optimizer(e.type));
    const Declaration& d = made->declaration();
    if (keep(d) && std::find(names.begin(), names.end(), d.name) == names.end())
      names.push_back(d.name);
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? std::string() : i + 1 == names.size() ? fmt::format(" {} ", conjunction) : ", ") +
           names[i];
  return out;
}

}  // namespace strata::optim
