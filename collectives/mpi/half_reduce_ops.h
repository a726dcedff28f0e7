// MPI reductions of float16 and bfloat16 tensors. MPI has no 16-bit float types, so these
// elements travel as MPI_UINT16_T and are combined by user-defined operations (MPI_Op_create):
// each pair is widened to float, combined, and rounded back to nearest even, as a GPU reduction
// of the same type rounds after each step. Created once per process, on first use (MPI must be
// initialized); MPI_Finalize frees them.
#pragma once
#include <mpi.h>

#include "base/dtype.h"
#include "collectives/communicator.h"

namespace tandem::collectives::mpi {

// The MPI_Op that applies `op` to elements of `dtype` (Float16 or BFloat16); Avg is the sum,
// divided afterwards like every other type's average.
MPI_Op half_reduce_op(DType dtype, ReduceOp op);

}  // namespace tandem::collectives::mpi
