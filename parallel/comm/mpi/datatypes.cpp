#include "parallel/comm/mpi/datatypes.hpp"

#include "parallel/comm/host_reduce.hpp"
#include "parallel/comm/mpi/mpi_check.hpp"

namespace strata::parallel::mpi {

namespace {

MPI_Op g_bf16_sum = MPI_OP_NULL, g_bf16_max = MPI_OP_NULL;
MPI_Op g_f16_sum = MPI_OP_NULL, g_f16_max = MPI_OP_NULL;

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  host_reduce(in, inout, static_cast<std::size_t>(*len), DType::bf16, ReduceOp::sum);
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  host_reduce(in, inout, static_cast<std::size_t>(*len), DType::bf16, ReduceOp::max);
}
void f16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  host_reduce(in, inout, static_cast<std::size_t>(*len), DType::f16, ReduceOp::sum);
}
void f16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  host_reduce(in, inout, static_cast<std::size_t>(*len), DType::f16, ReduceOp::max);
}

}  // namespace

MPI_Datatype datatype(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::f16:
    case DType::bf16:
      return MPI_UINT16_T;
    case DType::i8:
      return MPI_INT8_T;
    case DType::u8:
      return MPI_UINT8_T;
    case DType::i16:
      return MPI_INT16_T;
    case DType::u16:
      return MPI_UINT16_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::u32:
      return MPI_UINT32_T;
    case DType::i64:
      return MPI_INT64_T;
  }
  fail("comm", "no MPI datatype for dtype {}", static_cast<int>(t));
}

MPI_Op reduction(ReduceOp op, DType t) {
  const bool max = op == ReduceOp::max;
  if (t == DType::bf16) return max ? g_bf16_max : g_bf16_sum;
  if (t == DType::f16) return max ? g_f16_max : g_f16_sum;
  return max ? MPI_MAX : MPI_SUM;
}

void create_user_ops() {
  if (g_bf16_sum != MPI_OP_NULL) return;
  STRATA_CHECK_MPI(MPI_Op_create(&bf16_sum, 1, &g_bf16_sum));
  STRATA_CHECK_MPI(MPI_Op_create(&bf16_max, 1, &g_bf16_max));
  STRATA_CHECK_MPI(MPI_Op_create(&f16_sum, 1, &g_f16_sum));
  STRATA_CHECK_MPI(MPI_Op_create(&f16_max, 1, &g_f16_max));
}

void free_user_ops() {
  for (MPI_Op* op : {&g_bf16_sum, &g_bf16_max, &g_f16_sum, &g_f16_max})
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
}

}  // namespace strata::parallel::mpi
