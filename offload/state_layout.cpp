#include "offload/state_layout.hpp"

#include "offload/host_buffer.hpp"

namespace strata::offload {

using train::UnitOptimizerState;

PackedStateLayout pack(const train::StateLayout& l) {
  STRATA_CHECK(l.elements >= 0 && l.packed_second_moment >= 0 && l.factored >= 0, "offload",
               "negative state length ({} elements)", l.elements);
  PackedStateLayout p;
  p.layout = l;
  auto add = [&](bool present, std::int64_t n, DType dt, Tensor UnitOptimizerState::*member) {
    if (!present) return;
    p.segments.push_back({p.total, n, dt, member});
    p.total += round_up_io(static_cast<std::uint64_t>(n) * dtype_size(dt));
  };
  add(l.master, l.elements, DType::f32, &UnitOptimizerState::master);
  add(l.first_moment, l.elements, DType::f32, &UnitOptimizerState::m);
  add(l.v_elements() > 0, l.v_elements(), DType::f32, &UnitOptimizerState::v);
  add(l.quantized, l.elements, DType::u8, &UnitOptimizerState::m_codes);
  add(l.quantized, l.elements, DType::u8, &UnitOptimizerState::v_codes);
  add(l.quantized, l.blocks(), DType::f32, &UnitOptimizerState::m_absmax);
  add(l.quantized, l.blocks(), DType::f32, &UnitOptimizerState::v_absmax);
  add(l.factored > 0, l.factored, DType::f32, &UnitOptimizerState::factored);
  return p;
}

std::uint64_t PackedStateLayout::master_bytes() const {
  if (!layout.master) return 0;
  return segments.size() > 1 ? segments[1].offset : total;
}

train::UnitOptimizerState packed_views(const PackedStateLayout& p, std::byte* base, Device device) {
  UnitOptimizerState s;
  for (const auto& seg : p.segments) {
    auto st = Storage::wrap(base ? base + seg.offset : nullptr,
                            static_cast<std::size_t>(seg.elements) * dtype_size(seg.dtype),
                            device);
    s.*seg.member = Tensor(std::move(st), seg.dtype, Shape{seg.elements}, {1}, 0);
  }
  return s;
}

std::uint64_t packed_bytes(const train::StateLayout& l) { return pack(l).bytes(); }

std::uint64_t packed_bytes(std::int64_t elements, bool master, bool second_moment) {
  return packed_bytes(train::StateLayout{elements, master, second_moment});
}

}  // namespace strata::offload
