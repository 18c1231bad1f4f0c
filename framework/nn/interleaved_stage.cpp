#include "framework/nn/interleaved_stage.hpp"

#include "framework/nn/model.hpp"

namespace strata::nn {

// ---- ModelStage's chunk calls for a stage of one chunk ----

namespace {
void check_chunk_index(const ModelStage& s, int chunk) {
  STRATA_CHECK(chunk >= 0 && chunk < s.chunks(), "nn", "stage {} of {} has no chunk {} ({} chunks)",
               s.index(), s.count(), chunk, s.chunks());
}
}  // namespace

std::vector<UnitUse> ModelStage::chunk_unit_schedule(int chunk) const {
  check_chunk_index(*this, chunk);
  return unit_schedule();
}

StageOutput ModelStage::forward_chunk(Context& ctx, const Batch& batch, const Tensor& input,
                                      int chunk) {
  check_chunk_index(*this, chunk);
  return forward(ctx, batch, input);
}

Tensor ModelStage::backward_chunk(Context& ctx, const Tensor& output_grad, float scale, int chunk) {
  check_chunk_index(*this, chunk);
  return backward(ctx, output_grad, scale);
}

// ---- InterleavedStage ----

namespace {

// The engine's hooks with a chunk's unit ids shifted to the stage's.
class ShiftedHooks : public UnitHooks {
 public:
  ShiftedHooks(UnitHooks* inner, int shift) : inner_(inner), shift_(shift) {}
  void before_forward(int u) override { inner_->before_forward(u + shift_); }
  void after_forward(int u) override { inner_->after_forward(u + shift_); }
  void before_backward(int u) override { inner_->before_backward(u + shift_); }
  void after_backward(int u) override { inner_->after_backward(u + shift_); }

 private:
  UnitHooks* inner_;
  int shift_;
};

// Sets ctx.hooks to the shifted ones for one chunk's call, and back (also on an exception).
class ChunkHooks {
 public:
  ChunkHooks(Context& ctx, int shift) : ctx_(ctx), saved_(ctx.hooks), shifted_(ctx.hooks, shift) {
    if (saved_) ctx_.hooks = &shifted_;
  }
  ~ChunkHooks() { ctx_.hooks = saved_; }
  ChunkHooks(const ChunkHooks&) = delete;
  ChunkHooks& operator=(const ChunkHooks&) = delete;

 private:
  Context& ctx_;
  UnitHooks* saved_;
  ShiftedHooks shifted_;
};

}  // namespace

InterleavedStage::InterleavedStage(Model& model, int index, int count, int chunks)
    : ModelStage(index, count) {
  STRATA_CHECK(chunks >= 1 && count >= 1 && index >= 0 && index < count, "nn",
               "no chunks {} of stage {} of {}", chunks, index, count);
  int next = 0;
  for (int c = 0; c < chunks; ++c) {
    chunks_.push_back(model.stage(c * count + index, count * chunks));
    first_unit_.push_back(next);
    next += static_cast<int>(chunks_.back()->units().size());
  }
}

std::vector<std::vector<Parameter*>> InterleavedStage::units() {
  std::vector<std::vector<Parameter*>> out;
  for (auto& c : chunks_)
    for (auto& u : c->units()) out.push_back(std::move(u));
  return out;
}

std::vector<UnitUse> InterleavedStage::chunk_unit_schedule(int chunk) const {
  check_chunk_index(*this, chunk);
  std::vector<UnitUse> s;
  const std::vector<UnitUse> mine = chunks_[static_cast<std::size_t>(chunk)]->unit_schedule();
  for (UnitUse u : mine) {
    u.unit += first_unit(chunk);
    s.push_back(u);
  }
  return s;
}

std::vector<UnitUse> InterleavedStage::unit_schedule() const {
  std::vector<UnitUse> s;
  for (int c = 0; c < chunks(); ++c)
    for (const UnitUse& u : chunk_unit_schedule(c)) s.push_back(u);
  return s;
}

std::vector<TiedUnit> InterleavedStage::tied_units() const {
  std::vector<TiedUnit> out;
  for (int c = 0; c < chunks(); ++c)
    for (TiedUnit t : chunks_[static_cast<std::size_t>(c)]->tied_units()) {
      t.unit += first_unit(c);
      out.push_back(t);
    }
  return out;
}

Shape InterleavedStage::input_shape(const Batch& batch) const {
  return chunks_.back()->input_shape(batch);  // (chunk 0 of the first rank takes none)
}

Shape InterleavedStage::output_shape(const Batch& batch) const {
  return chunks_.front()->output_shape(batch);
}

StageOutput InterleavedStage::forward(Context& ctx, const Batch& batch, const Tensor& input) {
  STRATA_CHECK(chunks() == 1, "nn", "stage {} of {} holds {} chunks: run each with forward_chunk",
               index(), count(), chunks());
  return forward_chunk(ctx, batch, input, 0);
}

Tensor InterleavedStage::backward(Context& ctx, const Tensor& output_grad, float scale) {
  STRATA_CHECK(chunks() == 1, "nn", "stage {} of {} holds {} chunks: run each with backward_chunk",
               index(), count(), chunks());
  return backward_chunk(ctx, output_grad, scale, 0);
}

StageOutput InterleavedStage::forward_chunk(Context& ctx, const Batch& batch, const Tensor& input,
                                            int chunk) {
  check_chunk_index(*this, chunk);
  ChunkHooks hooks(ctx, first_unit(chunk));
  return chunks_[static_cast<std::size_t>(chunk)]->forward(ctx, batch, input);
}

Tensor InterleavedStage::backward_chunk(Context& ctx, const Tensor& output_grad, float scale,
                                        int chunk) {
  check_chunk_index(*this, chunk);
  ChunkHooks hooks(ctx, first_unit(chunk));
  return chunks_[static_cast<std::size_t>(chunk)]->backward(ctx, output_grad, scale);
}

}  // namespace strata::nn
