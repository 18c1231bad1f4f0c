// Lint fixture (not compiled): a backend header and the op table included by a layer.
#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/backend/ops/op_table.hpp"
