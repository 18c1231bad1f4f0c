#include "offload/state_layout.hpp"

#include "offload/host_buffer.hpp"

namespace strata::offload {

namespace {
Tensor view_at(std::byte* base, std::uint64_t offset, std::int64_t n, Device device) {
  auto s = Storage::wrap(base ? base + offset : nullptr, static_cast<std::size_t>(n) * 4, device);
  return Tensor(std::move(s), DType::f32, Shape{n}, {1}, 0);
}
}  // namespace

PackedStateLayout pack(const train::StateLayout& l) {
  STRATA_CHECK(l.elements >= 0, "offload", "negative state length {}", l.elements);
  PackedStateLayout p;
  p.layout = l;
  p.segment = round_up_io(static_cast<std::uint64_t>(l.elements) * 4);
  p.segments = (l.master ? 1 : 0) + 1 + (l.second_moment ? 1 : 0);
  return p;
}

train::UnitOptimizerState packed_views(const PackedStateLayout& p, std::byte* base, Device device) {
  train::UnitOptimizerState s;
  const std::int64_t n = p.layout.elements;
  std::uint64_t off = 0;
  if (p.layout.master) {
    s.master = view_at(base, off, n, device);
    off += p.segment;
  }
  s.m = view_at(base, off, n, device);
  off += p.segment;
  if (p.layout.second_moment) s.v = view_at(base, off, n, device);
  return s;
}

std::uint64_t packed_bytes(std::int64_t elements, bool master, bool second_moment) {
  return pack(train::StateLayout{elements, master, second_moment}).bytes();
}

}  // namespace strata::offload
