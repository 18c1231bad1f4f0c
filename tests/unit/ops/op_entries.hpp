// The entries of ops::OpTable by name and offset, for the tests that walk a table (completeness,
// one harness case per op). op_table_slots() says how many function pointers the table has, so a
// test can tell when this list falls behind the struct.
#pragma once

#include <cstddef>
#include <vector>

#include "framework/backend/ops/op_table.hpp"

namespace strata::ops::test {

struct OpEntry {
  const char* name;
  std::size_t offset;
};

// clang-format off
#define STRATA_TEST_OP_ENTRY(op) OpEntry{#op, offsetof(OpTable, op)}
// clang-format on
inline std::vector<OpEntry> op_entries() {
  return {STRATA_TEST_OP_ENTRY(matmul),
          STRATA_TEST_OP_ENTRY(linear_forward),
          STRATA_TEST_OP_ENTRY(linear_backward),
          STRATA_TEST_OP_ENTRY(layernorm_forward),
          STRATA_TEST_OP_ENTRY(layernorm_backward),
          STRATA_TEST_OP_ENTRY(gelu_forward),
          STRATA_TEST_OP_ENTRY(gelu_backward),
          STRATA_TEST_OP_ENTRY(attention_forward),
          STRATA_TEST_OP_ENTRY(attention_backward),
          STRATA_TEST_OP_ENTRY(embedding_forward),
          STRATA_TEST_OP_ENTRY(embedding_backward),
          STRATA_TEST_OP_ENTRY(cross_entropy_forward),
          STRATA_TEST_OP_ENTRY(cross_entropy_backward),
          STRATA_TEST_OP_ENTRY(row_max),
          STRATA_TEST_OP_ENTRY(row_sum_exp),
          STRATA_TEST_OP_ENTRY(target_logit),
          STRATA_TEST_OP_ENTRY(cross_entropy_backward_slice),
          STRATA_TEST_OP_ENTRY(combine_cross_entropy),
          STRATA_TEST_OP_ENTRY(add),
          STRATA_TEST_OP_ENTRY(add_inplace),
          STRATA_TEST_OP_ENTRY(scale_inplace),
          STRATA_TEST_OP_ENTRY(cast),
          STRATA_TEST_OP_ENTRY(sum_squares),
          STRATA_TEST_OP_ENTRY(has_inf_or_nan),
          STRATA_TEST_OP_ENTRY(adamw_step),
          STRATA_TEST_OP_ENTRY(sgd_step),
          STRATA_TEST_OP_ENTRY(lion_step),
          STRATA_TEST_OP_ENTRY(adamw8bit_step),
          STRATA_TEST_OP_ENTRY(lion8bit_step),
          STRATA_TEST_OP_ENTRY(sum_squares_add),
          STRATA_TEST_OP_ENTRY(adafactor_sq_sums),
          STRATA_TEST_OP_ENTRY(adafactor_ema),
          STRATA_TEST_OP_ENTRY(adafactor_factors),
          STRATA_TEST_OP_ENTRY(adafactor_factored_sumsq),
          STRATA_TEST_OP_ENTRY(adafactor_vector_sumsq),
          STRATA_TEST_OP_ENTRY(adafactor_apply_factored),
          STRATA_TEST_OP_ENTRY(adafactor_apply_vector),
          STRATA_TEST_OP_ENTRY(lamb_sums),
          STRATA_TEST_OP_ENTRY(lamb_apply),
          STRATA_TEST_OP_ENTRY(onebit_momentum),
          STRATA_TEST_OP_ENTRY(onebit_apply),
          STRATA_TEST_OP_ENTRY(onebit_lamb_sumsq),
          STRATA_TEST_OP_ENTRY(onebit_lamb_momentum),
          STRATA_TEST_OP_ENTRY(onebit_lamb_after_exchange),
          STRATA_TEST_OP_ENTRY(onebit_lamb_apply)};
}
#undef STRATA_TEST_OP_ENTRY

// Function pointers in an OpTable (every member but its name).
inline constexpr std::size_t op_table_slots() {
  return (sizeof(OpTable) - sizeof(const char*)) / sizeof(void*);
}

}  // namespace strata::ops::test
