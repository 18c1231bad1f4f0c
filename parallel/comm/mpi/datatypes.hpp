// Strata dtypes and reductions as MPI datatypes and ops. bf16/f16 travel as MPI_UINT16_T and
// reduce through user-defined ops that widen to f32, combine and round back to nearest even
// (no widened copy of the buffer is made); avg is MPI's sum followed by a division.
#pragma once

#include <mpi.h>

#include "framework/core/dtype.hpp"
#include "parallel/comm/reduce_op.hpp"

namespace strata::parallel::mpi {

MPI_Datatype datatype(DType t);
// The op that combines values for `op` (avg combines with sum). Needs create_user_ops() first.
MPI_Op reduction(ReduceOp op, DType t);

// Creates / frees the bf16 and f16 user ops (after MPI_Init, before MPI_Finalize).
void create_user_ops();
void free_user_ops();

}  // namespace strata::parallel::mpi
