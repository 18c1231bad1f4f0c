// The 1-bit compressed all-reduce with error feedback of DeepSpeed's compressed backends (1-bit
// Adam, Tang et al. 2021): every rank adds its worker error to its tensor, keeps sign × scale
// (scale = RMS of the tensor) and the rest as its new worker error, and sends chunk j of the
// signs to rank j (an all-to-all) and its scale to all; rank j averages the ranks' sign × scale
// of its chunk, adds its server error, compresses that the same way (one scale per chunk) and
// keeps the rest; the chunks' signs and scales are gathered by every rank. Every rank ends with
// the same tensor. Signs travel as bits (MSB first, >= 0 is +1), scales as f32.
#pragma once

#include <span>

#include "framework/optim/onebit_adam.hpp"
#include "parallel/comm/group.hpp"

namespace strata::parallel {

// Averages every tensor over `g` in place (two exchanges for all of them together); the tensors
// and their error buffers (optim::onebit_padded_size for g.size()) must be the same in number and
// size on every rank. A group of one leaves them unchanged (DeepSpeed compresses only when there
// are several ranks). CPU buffers; blocking.
void compressed_allreduce(const Group& g, std::span<const optim::ErrorFeedbackTensor> tensors);

}  // namespace strata::parallel
