// Lint fixture (not compiled): a layer calling a CPU kernel (and including kernels.hpp for it).
#include "framework/backend/cpu/kernels.hpp"

void forward() { strata::cpu::matmul(a, b, c, 1, 1, 1, false, false); }
