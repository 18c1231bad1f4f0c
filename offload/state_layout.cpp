#include "offload/state_layout.hpp"

#include "offload/host_buffer.hpp"

namespace strata::offload {

PackedStateLayout pack(const train::StateLayout& l) {
  STRATA_CHECK(l.elements >= 0, "offload", "negative state length ({} elements)", l.elements);
  PackedStateLayout p;
  p.layout = l;
  auto add = [&](std::int64_t n, DType dt, int tensor) {
    STRATA_CHECK(n >= 0, "offload", "negative state length ({} elements)", n);
    p.segments.push_back({p.total, n, dt, tensor});
    p.total += round_up_io(static_cast<std::uint64_t>(n) * dtype_size(dt));
  };
  if (l.master) add(l.elements, DType::f32, -1);
  for (std::size_t i = 0; i < l.tensors.size(); ++i)
    add(l.tensors[i].length, l.tensors[i].dtype, static_cast<int>(i));
  return p;
}

std::uint64_t PackedStateLayout::master_bytes() const {
  if (!layout.master) return 0;
  return segments.size() > 1 ? segments[1].offset : total;
}

train::UnitOptimizerState packed_views(const PackedStateLayout& p, std::byte* base, Device device) {
  train::UnitOptimizerState s;
  s.tensors.resize(p.layout.tensors.size());
  for (const auto& seg : p.segments) {
    auto st = Storage::wrap(base ? base + seg.offset : nullptr,
                            static_cast<std::size_t>(seg.elements) * dtype_size(seg.dtype),
                            device);
    (seg.tensor < 0 ? s.master : s.tensors[static_cast<std::size_t>(seg.tensor)]) =
        Tensor(std::move(st), seg.dtype, Shape{seg.elements}, {1}, 0);
  }
  return s;
}

std::uint64_t packed_bytes(const train::StateLayout& l) { return pack(l).bytes(); }

}  // namespace strata::offload
