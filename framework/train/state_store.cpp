#include "framework/train/state_store.hpp"

#include <vector>

namespace strata::train {

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
    for (const StateTensorSize& t : l.tensors)
      s.tensors.push_back(Tensor::zeros(Shape{t.length}, t.dtype, mem_));
    units_.push_back(std::move(s));
  }
  UnitOptimizerState& acquire(std::size_t u) override { return units_.at(u); }
  void release(std::size_t, bool) override {}
  std::size_t num_units() const override { return units_.size(); }
  Tier tier() const override { return mem_.tier; }

 private:
  TensorOptions mem_;
  std::vector<UnitOptimizerState> units_;
};

}  // namespace

std::unique_ptr<OptimizerStateStore> make_memory_state_store(const TensorOptions& memory) {
  return std::make_unique<MemoryStateStore>(memory);
}

}  // namespace strata::train
