// Bad configs: each must be refused with a message naming the key, the value and what is allowed.
#include <gtest/gtest.h>

#include "framework/config/config.hpp"
#include "tests/unit/config/expect_error.hpp"

namespace strata::config {
namespace {

struct BadConfig {
  const char* name;
  const char* json_text;
  std::vector<std::string> fragments;
};

void PrintTo(const BadConfig& b, std::ostream* os) {
  *os << b.name;
}

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, IsRefusedWithItsOwnMessage) {
  const BadConfig& b = GetParam();
  const json doc = json::parse(b.json_text);
  EXPECT_TRUE(testing::fails_with([&] { parse_config(doc); }, b.fragments));
}

// Valid except for what each case breaks.
#define MICRO "\"train_micro_batch_size_per_gpu\": 4"

const BadConfig kBad[] = {
    {"TopLevelTypo",
     R"({"train_micro_batch_size_per_gp": 8})",
     {"[config] unknown key 'train_micro_batch_size_per_gp'",
      "did you mean 'train_micro_batch_size_per_gpu'?"}},
    {"NestedTypo",
     "{" MICRO R"(, "zero_optimization": {"stgae": 2}})",
     {"unknown key 'zero_optimization.stgae'", "did you mean 'zero_optimization.stage'?"}},
    {"KeyInWrongSection",
     "{" MICRO R"(, "stage": 2})",
     {"unknown key 'stage'; valid keys at the top level: train_batch_size,",
      "('stage' is a key of zero_optimization)"}},
    {"NearestKeyOfTheSameSection",  // not fp16.loss_scale: bf16 has no loss scale
     "{" MICRO R"(, "bf16": {"enabled": true, "loss_scale": 0}})",
     {"unknown key 'bf16.loss_scale': bfloat16 needs no loss scaling; only fp16 has a loss scale"}},
    {"NearestDeepSpeedKey",
     "{" MICRO R"(, "seq_parallel_comm_data_type": "bf16"})",
     {"unknown key 'seq_parallel_comm_data_type'; did you mean "
      "'seq_parallel_communication_data_type'?"}},
    {"RecomputeModeTypo",
     "{" MICRO R"(, "strata": {"activation_checkpointing": "selectve"}})",
     {"strata.activation_checkpointing is \"selectve\"; allowed: true (= \"full\"), false (= "
      "\"none\"), \"none\", \"selective\", \"full\" (did you mean \"selective\"?)"}},
    {"RecomputeModeWrongType",
     "{" MICRO R"(, "strata": {"activation_checkpointing": 1}})",
     {"strata.activation_checkpointing must be true, false or a string, got 1 (an integer)"}},
    {"NothingClose",
     "{" MICRO R"(, "strata": {"model": {"flux_capacitor": 1}}})",
     {"unknown key 'strata.model.flux_capacitor'",
      "valid keys in strata.model: type, n_layer, n_head"}},
    {"DeepSpeedFeatureNotImplemented",
     "{" MICRO R"(, "activation_checkpointing": {"cpu_checkpointing": true}})",
     {"activation_checkpointing asks for activation checkpoints kept on the CPU, or partitioned "
      "over tensor-parallel ranks, a DeepSpeed feature Strata does not implement;",
      "Strata's switch is strata.activation_checkpointing"}},
    {"DeepSpeedValueNotImplemented",
     "{" MICRO R"(, "sparse_gradients": true})",
     {"sparse_gradients=true asks for sparse all-reduce of embedding gradients, a DeepSpeed "
      "feature Strata does not implement; remove the key or set it to false"}},
    {"PredivideFactorNotPositive",
     "{" MICRO R"(, "gradient_predivide_factor": 0})",
     {"gradient_predivide_factor"}},
    {"PartitionedCheckpointsWithTensorParallelism",
     "{" MICRO
     R"(, "activation_checkpointing": {"partition_activations": true}, "strata": {"tensor_parallel_size": 2, "model": {"vocab_size": 50304}}})",
     {"activation_checkpointing asks for", "a DeepSpeed feature Strata does not implement"}},
    {"DeepSpeedKeyOfTheWrongType",
     "{" MICRO R"(, "zero_optimization": {"sub_group_size": "big"}})",
     {"zero_optimization.sub_group_size must be an integer, got \"big\" (a string)"}},
    {"ReduceBucketZeroAtStage0",
     "{" MICRO R"(, "zero_optimization": {"reduce_bucket_size": 0}})",
     {"zero_optimization.reduce_bucket_size=0 asks for each parameter's gradient reduced in a "
      "call of its own, a DeepSpeed feature Strata does not implement;",
      "e.g. 500000000"}},
    {"ReduceScatterFalse",
     "{" MICRO R"(, "zero_optimization": {"stage": 2, "reduce_scatter": false}})",
     {"zero_optimization.reduce_scatter=false asks for gradients averaged with all-reduce at "
      "stages 1-3, a DeepSpeed feature Strata does not implement"}},
    {"AllgatherPartitionsFalse",
     "{" MICRO R"(, "zero_optimization": {"stage": 1, "allgather_partitions": false}})",
     {"zero_optimization.allgather_partitions=false asks for updated parameters gathered with a "
      "series of broadcasts, a DeepSpeed feature Strata does not implement"}},
    {"BiasCorrectionNotForSgd",
     "{" MICRO R"(, "optimizer": {"type": "SGD", "params": {"bias_correction": false}}})",
     {"optimizer.params.bias_correction"}},
    {"MaxGradNormInOptimizer",
     "{" MICRO R"(, "optimizer": {"type": "AdamW", "params": {"max_grad_norm": 1.0}}})",
     {"unknown key 'optimizer.params.max_grad_norm'", "set gradient_clipping"}},
    {"OptimizerParamTypo",
     "{" MICRO R"(, "optimizer": {"type": "AdamW", "params": {"torch_adm": true}}})",
     {"unknown key 'optimizer.params.torch_adm'; did you mean 'optimizer.params.torch_adam'?"}},
    {"OneCycleSchedule",
     "{" MICRO R"(, "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0}}})",
     {"scheduler.type=\"OneCycle\" asks for the 1-cycle schedule, a DeepSpeed feature Strata does "
      "not implement; Strata's scheduler types are \"WarmupLR\", \"WarmupDecayLR\", "
      "\"WarmupCosineLR\""}},
    {"OldAndNewNameBoth",
     "{" MICRO R"(, "bf16": {"enabled": true}, "bfloat16": {"enabled": true}})",
     {"bfloat16 and bf16 are both given; keep bf16"}},
    {"UnresolvedAuto",
     "{" MICRO R"(, "steps_per_print": "auto"})",
     {"steps_per_print is \"auto\", which Strata resolves only where the config determines the "
      "value", "--set steps_per_print=10"}},
    {"AutoOnAKeyHuggingFaceDoesNotFill",
     "{" MICRO R"(, "zero_optimization": {"stage": "auto"}})",
     {"zero_optimization.stage is \"auto\", which Strata resolves only where the config "
      "determines the value",
      "--set zero_optimization.stage=0"}},
    {"NotAnObject", "[1, 2]", {"a config must be a JSON object", "an array of 2"}},
    {"SectionWrongType",
     "{" MICRO R"(, "fp16": true})",
     {"fp16 must be an object, got true (a boolean)"}},
    {"StageAsString",
     "{" MICRO R"(, "zero_optimization": {"stage": "3"}})",
     {"zero_optimization.stage must be an integer, got \"3\" (a string)"}},
    {"StageOutOfRange",
     "{" MICRO R"(, "zero_optimization": {"stage": 4}})",
     {"zero_optimization.stage is 4; allowed: an integer from 0 to 3"}},
    {"NegativeMicroBatch",
     R"({"train_micro_batch_size_per_gpu": -1})",
     {"train_micro_batch_size_per_gpu is -1; allowed: an integer >= 1"}},
    {"FractionalMicroBatch",
     R"({"train_micro_batch_size_per_gpu": 2.5})",
     {"train_micro_batch_size_per_gpu must be an integer, got 2.5 (a number)"}},
    {"Fp16AndBf16",
     "{" MICRO R"(, "fp16": {"enabled": true}, "bf16": {"enabled": true}})",
     {"fp16.enabled and bf16.enabled are both true; enable at most one"}},
    {"MinScaleAboveInitial",
     "{" MICRO R"(, "fp16": {"enabled": true, "initial_scale_power": 2, "min_loss_scale": 8}})",
     {"fp16.min_loss_scale 8 is above the initial loss scale 2^2 = 4"}},
    {"OffloadParamWithoutStage3",
     "{" MICRO R"(, "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})",
     {"zero_optimization.offload_param.device is \"cpu\" but zero_optimization.stage is 2",
      "needs stage 3"}},
    {"OffloadOptimizerStage0",
     "{" MICRO R"(, "zero_optimization": {"offload_optimizer": {"device": "cpu"}}})",
     {"zero_optimization.offload_optimizer.device is \"cpu\" but zero_optimization.stage is 0",
      "needs stage 1, 2 or 3"}},
    {"NvmeWithoutPath",
     "{" MICRO R"(, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}})",
     {"zero_optimization.offload_optimizer.device is \"nvme\" but "
      "zero_optimization.offload_optimizer.nvme_path is not set"}},
    {"PathWithoutNvme",
     "{" MICRO
     R"(, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "nvme_path": "/nvme"}}})",
     {"zero_optimization.offload_param.nvme_path is set but zero_optimization.offload_param.device "
      "is \"cpu\""}},
    {"OffloadDeviceTypo",
     "{" MICRO R"(, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvm"}}})",
     {"zero_optimization.offload_param.device is \"nvm\"; allowed: \"none\", \"cpu\", \"nvme\"",
      "did you mean \"nvme\"?"}},
    {"InBackwardWithClipping",
     "{" MICRO R"(, "gradient_clipping": 1.0, "zero_optimization": {"stage": 2},
         "strata": {"optimizer_in_backward": true}})",
     {"strata.optimizer_in_backward with gradient_clipping 1: clipping needs the norm of every "
      "gradient before the first update; set gradient_clipping to 0"}},
    {"InBackwardWithFp16",
     "{" MICRO R"(, "fp16": {"enabled": true}, "zero_optimization": {"stage": 2},
         "strata": {"optimizer_in_backward": true}})",
     {"strata.optimizer_in_backward with fp16.enabled", "use bf16"}},
    {"InBackwardAtStage0",
     "{" MICRO R"(, "strata": {"optimizer_in_backward": true}})",
     {"strata.optimizer_in_backward with zero_optimization.stage 0",
      "set zero_optimization.stage to 1, 2 or 3"}},
    {"InBackwardWithAdafactor",
     "{" MICRO R"(, "optimizer": {"type": "Adafactor"}, "zero_optimization": {"stage": 1},
         "strata": {"optimizer_in_backward": true}})",
     {"strata.optimizer_in_backward with optimizer.type Adafactor is not implemented",
      "use Adam, AdamW, AdamW8bit, SGD, Lion or Lion8bit"}},
    {"InBackwardWithPipeline",
     "{" MICRO R"(, "zero_optimization": {"stage": 1},
         "strata": {"optimizer_in_backward": true, "pipeline_parallel_size": 2}})",
     {"strata.optimizer_in_backward with strata.pipeline_parallel_size 2 is not implemented"}},
    {"InBackwardWithOomRecovery",
     "{" MICRO R"(, "zero_optimization": {"stage": 3},
         "strata": {"optimizer_in_backward": true, "memory": {"on_oom": "recover"}}})",
     {"strata.optimizer_in_backward with strata.memory.on_oom \"recover\"",
      "set strata.memory.on_oom to \"fail\""}},
    {"HeadsDoNotDivideWidth",
     "{" MICRO R"(, "strata": {"model": {"n_embd": 100, "n_head": 3}}})",
     {"strata.model.n_embd 100 is not divisible by strata.model.n_head 3"}},
    {"TensorParallelZero",
     "{" MICRO R"(, "strata": {"tensor_parallel_size": 0}})",
     {"strata.tensor_parallel_size is 0; allowed: an integer >= 1"}},
    {"HeadsNotSplittable",
     "{" MICRO R"(, "strata": {"tensor_parallel_size": 5}})",
     {"strata.model.n_head 12 is not divisible by strata.tensor_parallel_size 5"}},
    {"MoreStagesThanLayers",
     "{" MICRO R"(, "strata": {"pipeline_parallel_size": 4, "model": {"n_layer": 2}}})",
     {"strata.pipeline_parallel_size 4 is more than strata.model.n_layer 2"}},
    {"VirtualStagesWithoutPipeline",
     "{" MICRO R"(, "strata": {"virtual_pipeline_stages": 2}})",
     {"strata.virtual_pipeline_stages 2 needs strata.pipeline_parallel_size 2 or more (it is 1)"}},
    {"MoreChunksThanLayers",
     "{" MICRO R"(, "strata": {"pipeline_parallel_size": 2, "virtual_pipeline_stages": 4, "model": {"n_layer": 6}}})",
     {"strata.pipeline_parallel_size 2 × strata.virtual_pipeline_stages 4 = 8 model chunks is "
      "more than strata.model.n_layer 6; every chunk needs at least one block"}},
    {"VirtualStagesWithMicroBatchesNotInGroups",
     R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 3, "strata": {"pipeline_parallel_size": 2, "virtual_pipeline_stages": 2, "model": {"n_layer": 4}}})",
     {"gradient_accumulation_steps 3 is not a multiple of strata.pipeline_parallel_size 2: the "
      "interleaved schedule"}},
    {"SequenceParallelWithoutTensorParallelism",
     "{" MICRO R"(, "strata": {"sequence_parallel": true}})",
     {"strata.sequence_parallel is true but strata.tensor_parallel_size is 1: sequence "
      "parallelism splits the tokens over the tensor-parallel ranks; set "
      "strata.sequence_parallel to false, or tensor_parallel_size to 2 or more"}},
    {"SequenceParallelWithBlockSizeNotSplittable",
     "{" MICRO R"(, "strata": {"tensor_parallel_size": 4, "sequence_parallel": true, "model": {"vocab_size": 50304, "block_size": 1022}}})",
     {"strata.model.block_size 1022 is not divisible by strata.tensor_parallel_size 4: with "
      "strata.sequence_parallel each tensor-parallel rank holds 1/4 of a sequence; make "
      "block_size a multiple of it (e.g. 1024), or set strata.sequence_parallel to false"}},
    {"SequenceParallelNotABoolean",
     "{" MICRO R"(, "strata": {"tensor_parallel_size": 2, "sequence_parallel": 1, "model": {"vocab_size": 50304}}})",
     {"strata.sequence_parallel must be"}},
    {"VirtualStagesZero",
     "{" MICRO R"(, "strata": {"virtual_pipeline_stages": 0}})",
     {"strata.virtual_pipeline_stages is 0; allowed: an integer >= 1"}},
    {"SamplingWithPipelineStages",
     "{" MICRO R"(, "strata": {"pipeline_parallel_size": 2, "sample": {"tokens": 8}}})",
     {"strata.sample.tokens 8 with strata.pipeline_parallel_size 2: sampling runs the whole model "
      "on each rank, but a rank holds only its pipeline stage; set strata.sample.tokens to 0"}},
    {"VocabularyNotSplittable",
     "{" MICRO R"(, "strata": {"tensor_parallel_size": 2, "model": {"vocab_size": 51}}})",
     {"strata.model.vocab_size 51 is not divisible by strata.tensor_parallel_size 2; tensor "
      "parallelism splits the vocabulary (pad vocab_size to 52)"}},
    {"SamplingWithTensorParallel",
     "{" MICRO R"(, "strata": {"tensor_parallel_size": 2, "sample": {"tokens": 8}, "model": {"vocab_size": 64}}})",
     {"strata.sample.tokens 8 with strata.tensor_parallel_size 2: sampling from a "
      "tensor-parallel model is not implemented; set strata.sample.tokens to 0"}},
    {"UnsupportedOptimizer",
     "{" MICRO R"(, "optimizer": {"type": "Adagrad", "params": {"lr": 0.3}}})",
     {"optimizer.type=\"Adagrad\" asks for the Adagrad optimizer, a DeepSpeed feature Strata does "
      "not implement; Strata's optimizer types are \"Adam\", \"AdamW\", \"AdamW8bit\", "
      "\"Adafactor\", \"Lamb\", \"OneBitAdam\", \"OneBitLamb\", \"SGD\", \"Lion\", "
      "\"Lion8bit\""}},
    {"LambClampUpsideDown",
     "{" MICRO R"(, "optimizer": {"type": "Lamb", "params": {"max_coeff": 0.3, "min_coeff": 0.5}}})",
     {"optimizer.params.min_coeff 0.5 is above max_coeff 0.3"}},
    {"LambOwnClipping",
     "{" MICRO R"(, "optimizer": {"type": "Lamb", "params": {"max_grad_norm": 1.0}}})",
     {"optimizer.params.max_grad_norm=1.0 asks for FusedLamb's own gradient clipping",
      "set gradient_clipping"}},
    {"AutoCastWithoutFp16",
     "{" MICRO R"(, "fp16": {"enabled": false, "auto_cast": true}})",
     {"fp16.auto_cast is true but fp16.enabled is not", "set fp16.enabled to true or remove fp16.auto_cast"}},
    {"OneBitLambBiasCorrection",
     "{" MICRO R"(, "optimizer": {"type": "OneBitLamb", "params": {"bias_correction": true}}})",
     {"optimizer.params.bias_correction=true asks for bias correction in 1-bit LAMB, which "
      "DeepSpeed's OnebitLamb accepts but never applies"}},
    {"OneBitLambEpsInsideSqrt",
     "{" MICRO R"(, "optimizer": {"type": "OneBitLamb", "params": {"eps_inside_sqrt": true}}})",
     {"optimizer.params.eps_inside_sqrt=true asks for eps inside the square root in 1-bit LAMB"}},
    {"OneBitLambFactorUpsideDown",
     "{" MICRO R"(, "optimizer": {"type": "OneBitLamb", "params": {"factor_min": 2, "factor_max": 1}}})",
     {"optimizer.params.factor_min 2 is above factor_max 1"}},
    {"OneBitLambNoWarmUp",
     "{" MICRO R"(, "optimizer": {"type": "OneBitLamb", "params": {"freeze_step": 0}}})",
     {"optimizer.params.freeze_step"}},
    {"UnknownOptimizer",
     "{" MICRO R"(, "optimizer": {"type": "Sophia"}})",
     {"optimizer.type is \"Sophia\"; allowed: \"Adam\", \"AdamW\", \"AdamW8bit\", \"Adafactor\", \"Lamb\", \"OneBitAdam\", \"OneBitLamb\", \"SGD\""}},
    {"OptimizerTypo",
     "{" MICRO R"(, "optimizer": {"type": "AdamWW"}})",
     {"did you mean \"AdamW\"?"}},
    {"ParamOfAnotherOptimizer",
     "{" MICRO R"(, "optimizer": {"type": "SGD", "params": {"betas": [0.9, 0.99]}}})",
     {"optimizer.params.betas is not a parameter of SGD; SGD takes: lr, momentum, weight_decay, "
      "nesterov"}},
    {"NegativeLearningRate",
     "{" MICRO R"(, "optimizer": {"params": {"lr": -0.001}}})",
     {"optimizer.params.lr is -0.001; allowed: a number >= 0"}},
    {"BetaOfOne",
     "{" MICRO R"(, "optimizer": {"params": {"betas": [0.9, 1.0]}}})",
     {"optimizer.params.betas is [0.9,1.0]; allowed: two numbers, each in [0, 1)"}},
    {"CoupledAdam",
     "{" MICRO R"(, "optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})",
     {"optimizer.params.adam_w_mode=false asks for Adam with weight decay added to the gradient "
      "(L2), a DeepSpeed feature Strata does not implement"}},
    {"NesterovWithoutMomentum",
     "{" MICRO R"(, "optimizer": {"type": "sgd", "params": {"nesterov": true}}})",
     {"optimizer.params.nesterov is true but optimizer.params.momentum is 0"}},
    {"CosineWithoutTotal",
     "{" MICRO R"(, "scheduler": {"type": "WarmupCosineLR"}})",
     {"scheduler.type WarmupCosineLR needs scheduler.params.total_num_steps"}},
    {"DecayEndsBeforeWarmup",
     "{" MICRO
     R"(, "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 10, "warmup_num_steps": 100}}})",
     {"scheduler.params.total_num_steps 10 is less than scheduler.params.warmup_num_steps 100"}},
    {"SchedulerParamsWithoutType",
     "{" MICRO R"(, "scheduler": {"params": {"warmup_num_steps": 10}}})",
     {"scheduler.params.warmup_num_steps is given but scheduler.type is not set"}},
    {"WarmupTypeUnknown",
     "{" MICRO R"(, "scheduler": {"type": "WarmupLR", "params": {"warmup_type": "cosine"}}})",
     {"scheduler.params.warmup_type is \"cosine\"; allowed: \"log\", \"linear\""}},
    {"CosineParamOnWarmupLR",
     "{" MICRO R"(, "scheduler": {"type": "WarmupLR", "params": {"cos_min_ratio": 0.1}}})",
     {"scheduler.params.cos_min_ratio is not a parameter of WarmupLR"}},
    {"BadSizeString",
     "{" MICRO R"(, "strata": {"memory": {"device_limit": "2 GX"}}})",
     {"strata.memory.device_limit is \"2 GX\"; allowed: a byte count", "\"2GiB\""}},
    {"NegativeSize",
     "{" MICRO R"(, "strata": {"memory": {"host_limit": -5}}})",
     {"strata.memory.host_limit must be a byte count or a size string such as \"2GiB\", got -5"}},
    {"ZeroSize",
     "{" MICRO R"(, "strata": {"memory": {"nvme_limit": "0GiB"}}})",
     {"strata.memory.nvme_limit is 0; allowed: a positive size, or null for no cap"}},
    {"Dropout",
     "{" MICRO R"(, "strata": {"model": {"dropout": 0.1}}})",
     {"strata.model.dropout is 0.1; allowed: 0"}},
    {"DeviceGpu",
     "{" MICRO R"(, "strata": {"device": "gpu"}})",
     {"strata.device is \"gpu\"; allowed: \"auto\", \"cpu\", \"cuda\""}},
    {"EmptyDir",
     "{" MICRO R"(, "strata": {"checkpoint": {"dir": ""}}})",
     {"strata.checkpoint.dir is \"\"; allowed: a non-empty string or null"}},
    {"IntervalWithoutDir",
     "{" MICRO R"(, "strata": {"checkpoint": {"interval": 100}}})",
     {"strata.checkpoint.interval is 100 but strata.checkpoint.dir is not set"}},
    {"UnalignedAioBlock",
     "{" MICRO R"(, "aio": {"block_size": 5000}})",
     {"aio.block_size is 5000; allowed: a multiple of 4096"}},
    {"NoBatchSize",
     R"({"gradient_accumulation_steps": 2})",
     {"set train_batch_size or train_micro_batch_size_per_gpu"}},
    {"BatchNotAMultiple",
     R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})",
     {"train_batch_size 30 is not a multiple of train_micro_batch_size_per_gpu 4 × "
      "gradient_accumulation_steps 2 = 8"}},
    {"TopKAboveVocab",
     "{" MICRO R"(, "strata": {"sample": {"top_k": 300}, "model": {"vocab_size": 256}}})",
     {"strata.sample.top_k 300 is more than strata.model.vocab_size 256"}},
    {"ZeroTemperature",
     "{" MICRO R"(, "strata": {"sample": {"temperature": 0}}})",
     {"strata.sample.temperature is 0; allowed: a number > 0"}},
};

INSTANTIATE_TEST_SUITE_P(Config, BadConfigTest, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace strata::config
