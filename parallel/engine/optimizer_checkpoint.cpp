#include "parallel/engine/optimizer_checkpoint.hpp"

#include <algorithm>

#include "framework/checkpoint/flat_range.hpp"

namespace strata::parallel {

namespace ck = strata::checkpoint;
using optim::StateShape;
using optim::StateTensor;

namespace {

std::string errors_entry(const nn::Parameter& p, int rank, int ranks) {
  return ck::state_entry_name(p.name, fmt::format("errors_{}_of_{}", rank, ranks));
}

// The entry of a blocks tensor: named after the unit's first parameter.
std::string blocks_entry(const nn::UnitLayout& l, const StateTensor& t) {
  return ck::state_entry_name(l.params.front()->name, t.entry);
}

std::int64_t unit_blocks(const nn::UnitLayout& l, const StateTensor& t) {
  return optim::block_count(l.numel, t.count);
}

// The blocks [first, end) of a blocks tensor that range r writes.
std::pair<std::int64_t, std::int64_t> saved_blocks(const nn::UnitLayout& l, const StateTensor& t,
                                                   const StateSaveRange& r) {
  const std::int64_t nb = unit_blocks(l, t);
  if (r.sharded) return {l.lo / t.count, std::min(nb, l.hi / t.count)};
  return {nb * r.dp_rank / r.dp_size, nb * (r.dp_rank + 1) / r.dp_size};
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

// Every state slice of unit u for range r, in the declared order (optimizer_checkpoint.hpp); s
// null: data pointers null (sizes only).
template <typename F>
void visit(const train::Trainer& t, const nn::UnitLayout& l, std::size_t u,
           const StateSaveRange& r, const train::UnitOptimizerState* s, int tp_index, F&& f) {
  if (!r.writes) return;
  const std::vector<StateTensor>& state = t.optimizer().declaration().state;
  auto at = [&](std::size_t i, std::int64_t offset) -> const void* {
    if (!s) return nullptr;
    const Tensor& x = (*s)[i];
    return static_cast<const unsigned char*>(x.raw()) +
           static_cast<std::size_t>(offset) * dtype_size(x.dtype());
  };
  // Element-wise, then blocks.
  for (std::size_t i = 0; i < state.size(); ++i)
    if (state[i].shape == StateShape::elements)
      elementwise(l, r.a, r.b, state[i].kind, s ? &(*s)[i] : nullptr, state[i].dtype, tp_index, f);
  for (std::size_t i = 0; i < state.size(); ++i) {
    const StateTensor& st = state[i];
    if (st.shape != StateShape::blocks) continue;
    const auto [ba, bb] = saved_blocks(l, st, r);
    if (ba >= bb) continue;
    f(ck::SliceRef{st.kind, blocks_entry(l, st), Shape{unit_blocks(l, st)}, st.dtype, ba, bb,
                   at(i, ba - l.lo / st.count)});
  }
  // Parameter by parameter: the vectors' owned elements, the matrices' factored statistics.
  const bool by_param = std::any_of(state.begin(), state.end(), [](const StateTensor& st) {
    return st.shape == StateShape::vectors || st.shape == StateShape::factored;
  });
  if (by_param)
    for (const optim::ParamGeometry& p : optim::param_geometry(l)) {
      const nn::Parameter& param = *l.params[p.index];
      for (std::size_t i = 0; i < state.size(); ++i) {
        const StateTensor& st = state[i];
        if (st.shape == StateShape::factored && p.matrix && r.replicated) {
          f(ck::SliceRef{st.kind + "_row", ck::state_entry_name(param.name, "row"), Shape{p.rows},
                         st.dtype, 0, p.rows, at(i, p.fac)});
          f(ck::SliceRef{st.kind + "_col", ck::state_entry_name(param.name, "col"), Shape{p.cols},
                         st.dtype, 0, p.cols, at(i, p.fac + p.rows)});
        } else if (st.shape == StateShape::vectors && !p.matrix) {
          const std::int64_t a = std::max(r.a, p.a), b = std::min(r.b, p.b);
          if (a < b)
            f(ck::SliceRef{st.kind, param.name, param.shape, st.dtype, a - p.offset, b - p.offset,
                           at(i, p.v + (a - p.a))});
        }
      }
    }
  // What every rank holds whole: written once, by the rank that writes replicated state.
  for (std::size_t i = 0; i < state.size(); ++i) {
    const StateTensor& st = state[i];
    if (st.shape != StateShape::per_param || !r.replicated) continue;
    for (std::size_t j = 0; j < l.params.size(); ++j)
      f(ck::SliceRef{st.kind, ck::state_entry_name(l.params[j]->name, st.entry), Shape{st.count},
                     st.dtype, 0, st.count, at(i, st.count * static_cast<std::int64_t>(j))});
  }
  // Each rank's own compression errors.
  for (std::size_t i = 0; i < state.size(); ++i) {
    const StateTensor& st = state[i];
    if (st.shape != StateShape::rank_errors) continue;
    const auto slots = t.error_slots(u);
    for (std::size_t j = 0; j < l.params.size(); ++j)
      if (slots[j].size > 0)
        f(ck::SliceRef{st.kind, errors_entry(*l.params[j], r.dp_rank, r.dp_size),
                       Shape{slots[j].size}, st.dtype, 0, slots[j].size, at(i, slots[j].worker)});
  }
}

}  // namespace

std::vector<ck::FlatParam> flat_params(const nn::UnitLayout& l) {
  std::vector<ck::FlatParam> out;
  for (std::size_t i = 0; i < l.params.size(); ++i)
    out.push_back({l.params[i]->name, l.params[i]->shape, l.offsets[i]});
  return out;
}

const std::string& checkpoint_optimizer_name(const train::Trainer& t) {
  return t.optimizer().declaration().checkpoint_name;
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
  const optim::Declaration& d = t.optimizer().declaration();
  if (m.state.optimizer != d.checkpoint_name)
    user_fail("checkpoint",
              "{} holds {} optimizer state but the trainer uses {}: resume with the optimizer "
              "it was saved with (optimizer.type), or start from its weights alone after "
              "`strata ckpt export`",
              dir, m.state.optimizer, d.checkpoint_name);
  t.optimizer().check_checkpoint(
      [&](std::string_view kind, std::string_view name) {
        return reader.has(kind, std::string(name));
      },
      store, dir);
  // Blocks are cut from each unit's flat buffer: the units must be those it was saved with.
  const auto blocks = std::find_if(d.state.begin(), d.state.end(), [](const StateTensor& st) {
    return st.shape == StateShape::blocks;
  });
  if (blocks != d.state.end())
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      const nn::UnitLayout& l = store.layout(u);
      if (l.params.empty()) continue;
      const ck::ParamEntry* e = m.find(blocks_entry(l, *blocks));
      if (!e || e->shape != Shape{unit_blocks(l, *blocks)})
        user_fail("checkpoint",
                  "{} has no {} block statistics '{}' of {} blocks: it was saved with "
                  "other units (quantization blocks are cut from each unit's flat buffer); "
                  "resume with the model layout it was saved with",
                  dir, d.name, blocks_entry(l, *blocks), unit_blocks(l, *blocks));
    }
}

void read_state(ck::CheckpointReader& reader, const train::Trainer& t, const nn::UnitLayout& l,
                std::size_t u, train::UnitOptimizerState& s, bool with_moments, int dp_rank,
                int dp_size) {
  // What the checkpoint does not hold (padding, other ranks' errors) stays zero.
  for (Tensor& x : s.tensors)
    if (x.defined()) x.zero();
  if (!with_moments) return;
  const std::vector<StateTensor>& state = t.optimizer().declaration().state;
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
  auto at = [&](std::size_t i, std::int64_t offset) {
    return static_cast<unsigned char*>(s[i].raw()) +
           static_cast<std::size_t>(offset) * dtype_size(s[i].dtype());
  };
  std::vector<optim::ParamGeometry> geometry;
  for (std::size_t i = 0; i < state.size(); ++i) {
    const StateTensor& st = state[i];
    switch (st.shape) {
      case StateShape::elements: read_elem(st.kind, s[i]); break;
      case StateShape::blocks: {
        const std::int64_t b0 = l.lo / st.count;
        const std::int64_t b1 = std::min(unit_blocks(l, st), l.hi / st.count);
        if (b0 < b1) reader.read_range(st.kind, blocks_entry(l, st), b0, b1, at(i, 0), st.dtype);
        break;
      }
      case StateShape::vectors:
      case StateShape::factored:
        if (geometry.empty()) geometry = optim::param_geometry(l);
        for (const optim::ParamGeometry& p : geometry) {
          const std::string& name = l.params[p.index]->name;
          if (st.shape == StateShape::factored && p.matrix) {
            reader.read_range(st.kind + "_row", ck::state_entry_name(name, "row"), 0, p.rows,
                              at(i, p.fac), st.dtype);
            reader.read_range(st.kind + "_col", ck::state_entry_name(name, "col"), 0, p.cols,
                              at(i, p.fac + p.rows), st.dtype);
          } else if (st.shape == StateShape::vectors && !p.matrix && p.a < p.b) {
            reader.read_range(st.kind, name, p.a - p.offset, p.b - p.offset, at(i, p.v), st.dtype);
          }
        }
        break;
      case StateShape::per_param:
        for (std::size_t j = 0; j < l.params.size(); ++j)
          reader.read_range(st.kind, ck::state_entry_name(l.params[j]->name, st.entry), 0,
                            st.count, at(i, st.count * static_cast<std::int64_t>(j)), st.dtype);
        break;
      case StateShape::rank_errors: {
        const auto slots = t.error_slots(u);
        for (std::size_t j = 0; j < l.params.size(); ++j) {
          const std::string name = errors_entry(*l.params[j], dp_rank, dp_size);
          if (slots[j].size > 0 && reader.has(st.kind, name))
            reader.read_range(st.kind, name, 0, slots[j].size, at(i, slots[j].worker), st.dtype);
        }
        break;
      }
    }
  }
}

}  // namespace strata::parallel
