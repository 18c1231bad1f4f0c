// Who checks an embedding's tokens against its table: the op (the default), or its caller, which has
// already checked every token of the batch on the host (Gpt::check_tokens, GptStage, before the
// batch goes up to a GPU). The CUDA op's own check reads its result back, a wait of the host for the
// GPU in forward and again in backward of every micro-batch; done_by_caller skips it there. Tokens
// outside the table are never read out of bounds either way: the kernels treat a token outside the
// rows they hold as another slice's (a zero row forward, no gradient backward).
#pragma once

namespace strata::ops {

enum class TokenCheck { in_op, done_by_caller };

}  // namespace strata::ops
