// Picks the op table of a device and checks that a table is complete.
#include <mutex>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "framework/core/meta_device.hpp"

namespace strata::ops {

void check_complete(const OpTable& t) {
  STRATA_CHECK(t.name, "ops", "an op table has no name");
  struct Entry {
    const char* name;
    const void* fn;
  };
#define STRATA_OP_ENTRY(op) Entry{#op, reinterpret_cast<const void*>(t.op)}
  const Entry entries[] = {
      STRATA_OP_ENTRY(matmul),
      STRATA_OP_ENTRY(linear_forward),
      STRATA_OP_ENTRY(linear_backward),
      STRATA_OP_ENTRY(layernorm_forward),
      STRATA_OP_ENTRY(layernorm_backward),
      STRATA_OP_ENTRY(gelu_forward),
      STRATA_OP_ENTRY(gelu_backward),
      STRATA_OP_ENTRY(attention_forward),
      STRATA_OP_ENTRY(attention_backward),
      STRATA_OP_ENTRY(embedding_forward),
      STRATA_OP_ENTRY(embedding_backward),
      STRATA_OP_ENTRY(cross_entropy_forward),
      STRATA_OP_ENTRY(cross_entropy_backward),
      STRATA_OP_ENTRY(row_max),
      STRATA_OP_ENTRY(row_sum_exp),
      STRATA_OP_ENTRY(target_logit),
      STRATA_OP_ENTRY(cross_entropy_backward_slice),
      STRATA_OP_ENTRY(combine_cross_entropy),
      STRATA_OP_ENTRY(add),
      STRATA_OP_ENTRY(add_inplace),
      STRATA_OP_ENTRY(scale_inplace),
      STRATA_OP_ENTRY(cast),
      STRATA_OP_ENTRY(sum_squares),
      STRATA_OP_ENTRY(has_inf_or_nan),
      STRATA_OP_ENTRY(adamw_step),
      STRATA_OP_ENTRY(sgd_step),
      STRATA_OP_ENTRY(lion_step),
      STRATA_OP_ENTRY(adamw8bit_step),
      STRATA_OP_ENTRY(lion8bit_step),
      STRATA_OP_ENTRY(sum_squares_add),
      STRATA_OP_ENTRY(adafactor_sq_sums),
      STRATA_OP_ENTRY(adafactor_ema),
      STRATA_OP_ENTRY(adafactor_factors),
      STRATA_OP_ENTRY(adafactor_factored_sumsq),
      STRATA_OP_ENTRY(adafactor_vector_sumsq),
      STRATA_OP_ENTRY(adafactor_apply_factored),
      STRATA_OP_ENTRY(adafactor_apply_vector),
      STRATA_OP_ENTRY(lamb_sums),
      STRATA_OP_ENTRY(lamb_apply),
      STRATA_OP_ENTRY(onebit_momentum),
      STRATA_OP_ENTRY(onebit_apply),
      STRATA_OP_ENTRY(onebit_lamb_sumsq),
      STRATA_OP_ENTRY(onebit_lamb_momentum),
      STRATA_OP_ENTRY(onebit_lamb_after_exchange),
      STRATA_OP_ENTRY(onebit_lamb_apply),
  };
#undef STRATA_OP_ENTRY
  // One entry per function pointer of OpTable: a new op added there without a line here fails
  // to compile.
  static_assert(sizeof(entries) / sizeof(entries[0]) * sizeof(void*) + sizeof(const char*) ==
                    sizeof(OpTable),
                "check_complete must list every OpTable entry");
  for (const Entry& e : entries)
    STRATA_CHECK(e.fn, "ops", "the {} backend's op table leaves {} unset: register it", t.name,
                 e.name);
}

const OpTable& op_table(Device device) {
  if (device.is_cpu()) {
    static const OpTable& cpu = []() -> const OpTable& {
      check_complete(cpu_op_table());
      return cpu_op_table();
    }();
    return cpu;
  }
  if (is_meta_cuda(device)) {
    static const OpTable& meta_cuda = []() -> const OpTable& {
      check_complete(meta_cuda_op_table());
      // The runtime's answers, when this build has CUDA kernels (they say "unknown" without a GPU).
      if (const MetaCudaQueries* q = cuda_meta_queries()) set_meta_cuda_queries(*q);
      return meta_cuda_op_table();
    }();
    return meta_cuda;
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
