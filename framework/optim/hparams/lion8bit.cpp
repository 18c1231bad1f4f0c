// optimizer.type "Lion8bit": Lion's params and defaults (bitsandbytes' Lion8bit takes the same).
#include "framework/optim/hparams/common.hpp"

namespace strata::optim {

const OptimizerSpec& lion_spec();  // hparams/lion.cpp

const OptimizerSpec& lion8bit_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s = lion_spec();
    s.name = "Lion8bit";
    s.summary = "Lion with an 8-bit block-wise quantized momentum, as bitsandbytes' Lion8bit";
    return s;
  }();
  return spec;
}

}  // namespace strata::optim
