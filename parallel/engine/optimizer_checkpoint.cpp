#include "parallel/engine/optimizer_checkpoint.hpp"

#include <algorithm>

#include "framework/checkpoint/flat_range.hpp"
#include "framework/optim/quantize.hpp"
#include "framework/train/adafactor_step.hpp"
#include "framework/train/onebit_lamb_step.hpp"

namespace strata::parallel {

namespace ck = strata::checkpoint;
using train::OptimizerKind;

namespace {

std::string errors_entry(const nn::Parameter& p, int rank, int ranks) {
  return ck::state_entry_name(p.name, fmt::format("errors_{}_of_{}", rank, ranks));
}

std::string scalars_entry(const nn::Parameter& p) {
  return ck::state_entry_name(p.name, "onebit_lamb");
}

constexpr auto kBlock = static_cast<std::int64_t>(optim::kQuantBlock);

std::int64_t unit_blocks(const nn::UnitLayout& l) {
  return static_cast<std::int64_t>(optim::quant_blocks(static_cast<std::size_t>(l.numel)));
}

std::string blocks_entry(const nn::UnitLayout& l) {
  return ck::state_entry_name(l.params.front()->name, "blocks");
}

// Slices of an element-wise state tensor for [a, b); `owned` (or null when only sizes are
// wanted) holds the unit's owned slice, which starts at flat position l.lo. A tensor-parallel
// part's slices are named by the whole parameter's elements (replicated ones by part 0 only).
template <typename F>
void elementwise(const nn::UnitLayout& l, std::int64_t a, std::int64_t b, std::string_view kind,
                 const Tensor* owned, DType dt, int tp_index, F&& f) {
  if (a >= b) return;
  const std::size_t esize = dtype_size(dt);
  for (const ck::FlatPiece& p : ck::split_flat_range(flat_params(l), a, b)) {
    const nn::Parameter& prm = *l.params[p.param];
    if (!prm.placement.split() && tp_index != 0) continue;
    const Shape whole = prm.placement.global_shape(prm.shape);
    const unsigned char* data =
        owned ? static_cast<const unsigned char*>(owned->raw()) +
                    static_cast<std::size_t>(p.flat_begin - l.lo) * esize
              : nullptr;
    to_global_slices(prm, p.begin, p.end,
                     [&](std::int64_t local, std::int64_t global, std::int64_t n, std::int64_t run,
                         std::int64_t stride) {
                       ck::SliceRef s{std::string(kind), prm.name, whole, dt, global, global + n,
                                      data ? data + static_cast<std::size_t>(local - p.begin) * esize
                                           : nullptr};
                       s.run = run;
                       s.stride = stride;
                       f(s);
                     });
  }
}

// Every state slice of unit u for range r; s null: data pointers null (sizes only).
template <typename F>
void visit(const train::Trainer& t, const nn::UnitLayout& l, std::size_t u,
           const StateSaveRange& r, const train::UnitOptimizerState* s, int tp_index, F&& f) {
  auto elem = [&](std::string_view kind, const Tensor train::UnitOptimizerState::*member, DType dt) {
    elementwise(l, r.a, r.b, kind, s ? &(s->*member) : nullptr, dt, tp_index, f);
  };
  auto at = [&](const Tensor train::UnitOptimizerState::*member, std::int64_t offset, DType dt) {
    return s ? static_cast<const void*>(static_cast<const unsigned char*>((s->*member).raw()) +
                                        static_cast<std::size_t>(offset) * dtype_size(dt))
             : nullptr;
  };
  using S = train::UnitOptimizerState;
  switch (t.options().optimizer) {
    case OptimizerKind::adamw:
    case OptimizerKind::lamb:
      elem(ck::kExpAvg, &S::m, DType::f32);
      elem(ck::kExpAvgSq, &S::v, DType::f32);
      break;
    case OptimizerKind::onebit_adam:
    case OptimizerKind::onebit_lamb: {
      elem(ck::kExpAvg, &S::m, DType::f32);
      elem(ck::kExpAvgSq, &S::v, DType::f32);
      if (t.options().optimizer == OptimizerKind::onebit_lamb) {
        elem(ck::kExpAvgSqFresh, &S::factored, DType::f32);
        // The scalars are equal on every rank: saved once, by the rank that saves replicated state.
        for (std::size_t i = 0; r.replicated && i < l.params.size(); ++i)
          f(ck::SliceRef{std::string(ck::kOneBitLambScalars), scalars_entry(*l.params[i]),
                         Shape{static_cast<std::int64_t>(optim::kOneBitLambScalars)}, DType::f32, 0,
                         static_cast<std::int64_t>(optim::kOneBitLambScalars),
                         at(&S::factored, train::OneBitLambStep::scalars_offset(l, i), DType::f32)});
      }
      const auto slots = t.error_slots(u);
      for (std::size_t i = 0; i < l.params.size(); ++i)
        if (slots[i].size > 0)
          f(ck::SliceRef{std::string(ck::kCompressionErrors),
                       errors_entry(*l.params[i], r.dp_rank, r.dp_size), Shape{slots[i].size},
                       DType::f32, 0, slots[i].size, at(&S::errors, slots[i].worker, DType::f32)});
      break;
    }
    case OptimizerKind::sgd:
      elem(ck::kMomentum, &S::m, DType::f32);
      break;
    case OptimizerKind::adamw8bit: {
      elem(ck::kExpAvgQ8, &S::m_codes, DType::u8);
      elem(ck::kExpAvgSqQ8, &S::v_codes, DType::u8);
      if (r.block_a >= r.block_b) break;
      const std::string name = blocks_entry(l);
      const Shape shape{unit_blocks(l)};
      const std::int64_t off = r.block_a - l.lo / kBlock;
      f(ck::SliceRef{std::string(ck::kExpAvgAbsmax), name, shape, DType::f32, r.block_a,
                     r.block_b, at(&S::m_absmax, off, DType::f32)});
      f(ck::SliceRef{std::string(ck::kExpAvgSqAbsmax), name, shape, DType::f32, r.block_a,
                     r.block_b, at(&S::v_absmax, off, DType::f32)});
      break;
    }
    case OptimizerKind::adafactor: {
      if (t.options().adafactor.has_beta1()) elem(ck::kExpAvg, &S::m, DType::f32);
      for (const auto& p : t.adafactor()->params(u)) {
        const nn::Parameter& param = *l.params[p.index];
        if (p.factored) {
          if (!r.replicated) continue;
          f(ck::SliceRef{std::string(ck::kExpAvgSqRow), ck::state_entry_name(param.name, "row"),
                         Shape{p.rows}, DType::f32, 0, p.rows, at(&S::factored, p.fac, DType::f32)});
          f(ck::SliceRef{std::string(ck::kExpAvgSqCol), ck::state_entry_name(param.name, "col"),
                         Shape{p.cols}, DType::f32, 0, p.cols,
                         at(&S::factored, p.fac + p.rows, DType::f32)});
        } else {
          const std::int64_t a = std::max(r.a, p.a), b = std::min(r.b, p.b);
          if (a >= b) continue;
          f(ck::SliceRef{std::string(ck::kExpAvgSq), param.name, param.shape, DType::f32,
                         a - p.offset, b - p.offset, at(&S::v, p.v + (a - p.a), DType::f32)});
        }
      }
      break;
    }
  }
}

}  // namespace

std::vector<ck::FlatParam> flat_params(const nn::UnitLayout& l) {
  std::vector<ck::FlatParam> out;
  for (std::size_t i = 0; i < l.params.size(); ++i)
    out.push_back({l.params[i]->name, l.params[i]->shape, l.offsets[i]});
  return out;
}

const char* checkpoint_optimizer_name(const train::Trainer& t) {
  switch (t.options().optimizer) {
    case OptimizerKind::adamw: return "adamw";
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adamw8bit: return "adamw8bit";
    case OptimizerKind::adafactor: return "adafactor";
    case OptimizerKind::lamb: return "lamb";
    case OptimizerKind::onebit_adam: return "onebitadam";
    case OptimizerKind::onebit_lamb: return "onebitlamb";
  }
  return "?";
}

void for_each_state_slice(const train::Trainer& t, const nn::UnitLayout& l, std::size_t u,
                          const StateSaveRange& r, const train::UnitOptimizerState& s,
                          int tp_index, const std::function<void(const ck::SliceRef&)>& f) {
  visit(t, l, u, r, &s, tp_index, f);
}

std::size_t state_slice_bytes(const train::Trainer& t, const nn::UnitLayout& l, std::size_t u,
                              const StateSaveRange& r, int tp_index, std::size_t* slices) {
  std::size_t bytes = 0;
  visit(t, l, u, r, nullptr, tp_index, [&](const ck::SliceRef& sl) {
    bytes += static_cast<std::size_t>(sl.end - sl.begin) * dtype_size(sl.dtype);
    if (slices) ++*slices;
  });
  return bytes;
}

void check_state_compatible(const ck::CheckpointReader& reader, const nn::ParamStore& store,
                            const train::Trainer& t) {
  const ck::Manifest& m = reader.manifest();
  if (m.state.optimizer.empty()) return;
  const std::string& dir = reader.dir();
  if (m.state.optimizer != checkpoint_optimizer_name(t))
    user_fail("checkpoint",
              "{} holds {} optimizer state but the trainer uses {}: resume with the optimizer "
              "it was saved with (optimizer.type), or start from its weights alone after "
              "`strata ckpt export`",
              dir, m.state.optimizer, checkpoint_optimizer_name(t));
  if (t.options().optimizer == OptimizerKind::adafactor && store.num_units() > 0 &&
      !store.layout(0).params.empty()) {
    const bool saved = reader.has(ck::kExpAvg, store.layout(0).params.front()->name);
    const bool want = t.options().adafactor.has_beta1();
    if (saved != want)
      user_fail("checkpoint",
                "{} was saved by Adafactor {} a first moment but optimizer.params.beta1 is {}: "
                "resume with the beta1 it was saved with",
                dir, saved ? "with" : "without",
                want ? fmt::format("{}", t.options().adafactor.beta1) : std::string("null"));
  }
  if (t.options().optimizer == OptimizerKind::adamw8bit) {
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      const nn::UnitLayout& l = store.layout(u);
      if (l.params.empty()) continue;
      const ck::ParamEntry* e = m.find(blocks_entry(l));
      if (!e || e->shape != Shape{unit_blocks(l)})
        user_fail("checkpoint",
                  "{} has no AdamW8bit block statistics '{}' of {} blocks: it was saved with "
                  "other units (quantization blocks are cut from each unit's flat buffer); "
                  "resume with the model layout it was saved with",
                  dir, blocks_entry(l), unit_blocks(l));
    }
  }
}

void read_state(ck::CheckpointReader& reader, const train::Trainer& t, const nn::UnitLayout& l,
                std::size_t u, train::UnitOptimizerState& s, bool with_moments, int dp_rank,
                int dp_size) {
  if (!with_moments) {
    for (Tensor* x :
         {&s.m, &s.v, &s.m_codes, &s.v_codes, &s.m_absmax, &s.v_absmax, &s.factored, &s.errors})
      if (x->defined()) x->zero();
    return;
  }
  const std::int64_t hi = std::max(l.lo, std::min(l.hi, l.numel));  // padding only: none
  const std::vector<ck::FlatParam> params = flat_params(l);
  const auto pieces = ck::split_flat_range(params, l.lo, hi);
  auto read_elem = [&](std::string_view kind, Tensor& dst) {
    const std::size_t esize = dtype_size(dst.dtype());
    for (const ck::FlatPiece& p : pieces) {
      unsigned char* at =
          static_cast<unsigned char*>(dst.raw()) + static_cast<std::size_t>(p.flat_begin - l.lo) * esize;
      // A tensor-parallel part reads its runs of the whole parameter.
      to_global(*l.params[p.param], p.begin, p.end,
                [&](std::int64_t local, std::int64_t global, std::int64_t n) {
                  reader.read_range(kind, params[p.param].name, global, global + n,
                                    at + static_cast<std::size_t>(local - p.begin) * esize,
                                    dst.dtype());
                });
    }
  };
  switch (t.options().optimizer) {
    case OptimizerKind::adamw:
    case OptimizerKind::lamb:
      read_elem(ck::kExpAvg, s.m);
      read_elem(ck::kExpAvgSq, s.v);
      break;
    case OptimizerKind::onebit_adam:
    case OptimizerKind::onebit_lamb: {
      read_elem(ck::kExpAvg, s.m);
      read_elem(ck::kExpAvgSq, s.v);
      if (t.options().optimizer == OptimizerKind::onebit_lamb) {
        s.factored.zero();
        read_elem(ck::kExpAvgSqFresh, s.factored);
        for (std::size_t i = 0; i < l.params.size(); ++i)
          reader.read_range(ck::kOneBitLambScalars, scalars_entry(*l.params[i]), 0,
                            static_cast<std::int64_t>(optim::kOneBitLambScalars),
                            s.factored.data<float>() + train::OneBitLambStep::scalars_offset(l, i),
                            DType::f32);
      }
      if (s.errors.defined()) s.errors.zero();  // 1-bit LAMB: only the first unit has errors
      const auto slots = t.error_slots(u);
      for (std::size_t i = 0; i < l.params.size(); ++i) {
        const std::string name = errors_entry(*l.params[i], dp_rank, dp_size);
        if (slots[i].size > 0 && reader.has(ck::kCompressionErrors, name))
          reader.read_range(ck::kCompressionErrors, name, 0, slots[i].size,
                            s.errors.data<float>() + slots[i].worker, DType::f32);
      }
      break;
    }
    case OptimizerKind::sgd:
      read_elem(ck::kMomentum, s.m);
      break;
    case OptimizerKind::adamw8bit: {
      read_elem(ck::kExpAvgQ8, s.m_codes);
      read_elem(ck::kExpAvgSqQ8, s.v_codes);
      s.m_absmax.zero();
      s.v_absmax.zero();
      const std::int64_t b0 = l.lo / kBlock;
      const std::int64_t b1 = std::min(unit_blocks(l), l.hi / kBlock);
      if (b0 < b1) {
        const std::string name = blocks_entry(l);
        reader.read_range(ck::kExpAvgAbsmax, name, b0, b1, s.m_absmax.data<float>(), DType::f32);
        reader.read_range(ck::kExpAvgSqAbsmax, name, b0, b1, s.v_absmax.data<float>(), DType::f32);
      }
      break;
    }
    case OptimizerKind::adafactor:
      if (t.options().adafactor.has_beta1()) read_elem(ck::kExpAvg, s.m);
      for (const auto& p : t.adafactor()->params(u)) {
        const std::string& name = l.params[p.index]->name;
        if (p.factored) {
          float* st = s.factored.data<float>() + p.fac;
          reader.read_range(ck::kExpAvgSqRow, ck::state_entry_name(name, "row"), 0, p.rows, st,
                            DType::f32);
          reader.read_range(ck::kExpAvgSqCol, ck::state_entry_name(name, "col"), 0, p.cols,
                            st + p.rows, DType::f32);
        } else if (p.a < p.b) {
          reader.read_range(ck::kExpAvgSq, name, p.a - p.offset, p.b - p.offset,
                            s.v.data<float>() + p.v, DType::f32);
        }
      }
      break;
  }
}

}  // namespace strata::parallel
