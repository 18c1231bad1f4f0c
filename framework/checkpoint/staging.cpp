#include "framework/checkpoint/staging.hpp"

#include <cstring>

namespace strata::checkpoint {

namespace {

TensorOptions host_staging(MemoryLedger& ledger) {
  TensorOptions o;
  o.device = Device::cpu();
  o.tier = Tier::host;
  o.category = Category::other;
  o.ledger = &ledger;
  return o;
}

}  // namespace

SliceRef StagedSlice::ref() const {
  return SliceRef{kind, name, global_shape, data.dtype(), begin, end, data.raw()};
}

StagedSlice stage(const SliceRef& s, MemoryLedger& ledger) {
  validate_slice(s, "staging");
  const std::int64_t n = s.end - s.begin;
  Tensor t = Tensor::empty(Shape{n}, s.dtype, host_staging(ledger));
  std::memcpy(t.raw(), s.data, static_cast<std::size_t>(n) * dtype_size(s.dtype));
  return StagedSlice{s.kind, s.name, s.global_shape, s.begin, s.end, std::move(t)};
}

StagedSlice stage(std::string kind, std::string name, Shape global_shape, std::int64_t begin,
                  const Tensor& src, MemoryLedger& ledger) {
  const std::int64_t n = src.numel();
  Tensor t = Tensor::empty(Shape{n}, src.dtype(), host_staging(ledger));
  const Tensor flat = src.is_contiguous() ? src.view(Shape{n}) : src.contiguous().view(Shape{n});
  t.copy_from(flat);
  StagedSlice out{std::move(kind), std::move(name), std::move(global_shape),
                  begin,           begin + n,       std::move(t)};
  validate_slice(out.ref(), "staging");
  return out;
}

}  // namespace strata::checkpoint
