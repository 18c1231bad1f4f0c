// Lint fixture (not compiled): op_table.hpp included only to ask whether the build has CUDA
// kernels (train/from_config.cpp's check of strata.device "cuda").
#include "framework/backend/ops/op_table.hpp"

Device device() {
  if (!strata::ops::cuda_op_table()) fail("no CUDA kernels");
  return Device::cuda(0);
}
