#include "framework/train/state_store.hpp"

#include <vector>

#include "framework/optim/quantize.hpp"

namespace strata::train {

std::int64_t StateLayout::blocks() const {
  return quantized ? static_cast<std::int64_t>(optim::quant_blocks(static_cast<std::size_t>(elements))) : 0;
}

namespace {

class MemoryStateStore final : public OptimizerStateStore {
 public:
  explicit MemoryStateStore(const TensorOptions& memory) : mem_(memory.with(Category::optimizer)) {}

  void create(std::size_t u, const StateLayout& l, const Tensor& values) override {
    STRATA_CHECK(u == units_.size(), "train", "optimizer state created out of order (unit {})", u);
    UnitOptimizerState s;
    const Shape shape{l.elements};
    if (l.master) {
      s.master = Tensor::empty(shape, DType::f32, mem_);
      s.master.copy_from(values);
    }
    auto zeros = [&](std::int64_t n, DType dt) { return Tensor::zeros(Shape{n}, dt, mem_); };
    if (l.first_moment) s.m = zeros(l.elements, DType::f32);
    if (l.v_elements() > 0) s.v = zeros(l.v_elements(), DType::f32);
    if (l.quantized) {
      s.m_codes = zeros(l.elements, DType::u8);
      s.v_codes = zeros(l.elements, DType::u8);
      s.m_absmax = zeros(l.blocks(), DType::f32);
      s.v_absmax = zeros(l.blocks(), DType::f32);
    }
    if (l.factored > 0) s.factored = zeros(l.factored, DType::f32);
    if (l.errors > 0) s.errors = zeros(l.errors, DType::f32);
    units_.push_back(std::move(s));
  }
  UnitOptimizerState& acquire(std::size_t u) override { return units_.at(u); }
  void release(std::size_t, bool) override {}
  std::size_t num_units() const override { return units_.size(); }

 private:
  TensorOptions mem_;
  std::vector<UnitOptimizerState> units_;
};

}  // namespace

std::unique_ptr<OptimizerStateStore> make_memory_state_store(const TensorOptions& memory) {
  return std::make_unique<MemoryStateStore>(memory);
}

}  // namespace strata::train
