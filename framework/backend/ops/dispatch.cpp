// Picks the op table of a device and checks that a table is complete.
#include <mutex>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/ops/op_table.hpp"

namespace strata::ops {

void check_complete(const OpTable& t) {
  STRATA_CHECK(t.name, "ops", "an op table has no name");
  const void* entries[] = {
      reinterpret_cast<const void*>(t.matmul),
      reinterpret_cast<const void*>(t.linear_forward),
      reinterpret_cast<const void*>(t.linear_backward),
      reinterpret_cast<const void*>(t.layernorm_forward),
      reinterpret_cast<const void*>(t.layernorm_backward),
      reinterpret_cast<const void*>(t.gelu_forward),
      reinterpret_cast<const void*>(t.gelu_backward),
      reinterpret_cast<const void*>(t.attention_forward),
      reinterpret_cast<const void*>(t.attention_backward),
      reinterpret_cast<const void*>(t.embedding_forward),
      reinterpret_cast<const void*>(t.embedding_backward),
      reinterpret_cast<const void*>(t.cross_entropy_forward),
      reinterpret_cast<const void*>(t.cross_entropy_backward),
      reinterpret_cast<const void*>(t.row_max),
      reinterpret_cast<const void*>(t.row_sum_exp),
      reinterpret_cast<const void*>(t.target_logit),
      reinterpret_cast<const void*>(t.cross_entropy_backward_slice),
      reinterpret_cast<const void*>(t.add),
      reinterpret_cast<const void*>(t.add_inplace),
      reinterpret_cast<const void*>(t.scale_inplace),
      reinterpret_cast<const void*>(t.cast),
      reinterpret_cast<const void*>(t.sum_squares),
      reinterpret_cast<const void*>(t.has_inf_or_nan),
      reinterpret_cast<const void*>(t.adamw_step),
      reinterpret_cast<const void*>(t.sgd_step),
  };
  static_assert(sizeof(entries) / sizeof(entries[0]) * sizeof(void*) + sizeof(const char*) ==
                    sizeof(OpTable),
                "check_complete must list every OpTable entry");
  for (std::size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); ++i)
    STRATA_CHECK(entries[i], "ops", "the {} backend's op table leaves entry {} unset", t.name, i);
}

const OpTable& op_table(Device device) {
  if (device.is_cpu()) {
    static const OpTable& cpu = []() -> const OpTable& {
      check_complete(cpu_op_table());
      return cpu_op_table();
    }();
    return cpu;
  }
  if (device.is_meta()) {
    static const OpTable& meta = []() -> const OpTable& {
      check_complete(meta_op_table());
      return meta_op_table();
    }();
    return meta;
  }
  static const OpTable* cuda_table = [] {
    const OpTable* t = cuda_op_table();
    if (t) check_complete(*t);
    return t;
  }();
  if (!cuda_table) {
    if (!cuda::compiled())
      user_fail("ops", "a tensor is on {} but this Strata build has no CUDA support: rebuild with "
                "-DSTRATA_WITH_CUDA=ON on a machine with the CUDA toolkit, or use the cpu device",
                device.str());
    user_fail("ops", "a tensor is on {} but this Strata build has no CUDA kernels: use the cpu "
              "device (strata.device: \"cpu\")", device.str());
  }
  return *cuda_table;
}

}  // namespace strata::ops
