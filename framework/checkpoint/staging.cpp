#include "framework/checkpoint/staging.hpp"

#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/raw_io.hpp"

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
  SliceRef r{kind, name, global_shape, data.dtype(), begin, end, data.raw(), checksum};
  r.run = run;
  r.stride = stride;
  return r;
}

StagedSlice stage(const SliceRef& s, MemoryLedger& ledger) {
  validate_slice(s, "staging");
  const std::int64_t n = s.end - s.begin;
  Tensor t = Tensor::empty(Shape{n}, s.dtype, host_staging(ledger));
  const std::uint32_t crc = crc32_copy(t.raw(), s.data, t.nbytes());
  return StagedSlice{s.kind, s.name, s.global_shape, s.begin, s.end, std::move(t), crc, s.run,
                     s.stride};
}

StagedSlice stage(std::string kind, std::string name, Shape global_shape, std::int64_t begin,
                  const Tensor& src, MemoryLedger& ledger) {
  const std::int64_t n = src.numel();
  Tensor t = Tensor::empty(Shape{n}, src.dtype(), host_staging(ledger));
  std::uint32_t crc = 0;
  if (!src.device().is_cuda() && src.is_contiguous()) {
    crc = crc32_copy(t.raw(), src.raw(), t.nbytes());
  } else {
    const Tensor flat = src.is_contiguous() ? src.view(Shape{n}) : src.contiguous().view(Shape{n});
    t.copy_from(flat);
    crc = crc32(t.raw(), t.nbytes());
  }
  StagedSlice out{std::move(kind),
                  std::move(name),
                  std::move(global_shape),
                  begin,
                  begin + n,
                  std::move(t),
                  crc};
  validate_slice(out.ref(), "staging");
  return out;
}

StagingArena::StagingArena(std::size_t bytes, MemoryLedger& ledger) : ledger_(&ledger) {
  if (bytes == 0) return;
  storage_ =
      Storage::allocate(bytes + kDirectIoAlign, Device::cpu(), Tier::host, Category::other, ledger);
  const auto addr = reinterpret_cast<std::uintptr_t>(storage_->data());
  shift_ = (kDirectIoAlign - addr % kDirectIoAlign) % kDirectIoAlign;
  capacity_ = bytes;
}

StagedSlice StagingArena::stage(const SliceRef& s) {
  validate_slice(s, "staging");
  const std::size_t esize = dtype_size(s.dtype);
  const std::int64_t n = s.end - s.begin;
  const std::size_t bytes = static_cast<std::size_t>(n) * esize;
  const std::size_t at = shift_ + used_;
  if (!storage_ || used_ + bytes > capacity_ || at % esize != 0)
    return checkpoint::stage(s, *ledger_);
  Tensor t(storage_, s.dtype, Shape{n}, {1}, static_cast<std::int64_t>(at / esize));
  const std::uint32_t crc = crc32_copy(t.raw(), s.data, bytes);
  used_ += bytes;
  return StagedSlice{s.kind, s.name, s.global_shape, s.begin, s.end, std::move(t), crc, s.run,
                     s.stride};
}

}  // namespace strata::checkpoint
