// mixer: a model written outside Strata's tree (an MLP-mixer, mixer.hpp) on synthetic sequences
// (sequences.hpp), trained by Strata's engine from a DeepSpeed-style JSON config: data
// parallelism over the ranks `strata run` starts, ZeRO stages 1-3, optimizer and parameter
// offload, mixed precision, checkpoints and resume. One JSON line per step with --metrics.
//
//   strata run -n 2 -- ./mixer --config config.json --checkpoint-dir ck --metrics m.jsonl
//   (the same command again resumes from ck's newest complete checkpoint)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <strata/strata.hpp>

#include "mixer.hpp"
#include "sequences.hpp"

using namespace strata;

namespace {

struct Args {
  std::string config, metrics;
  std::vector<std::string> sets;  // config overrides: key=value
  std::int64_t exit_after_steps = 0;
  int tokens = 8, channels = 16, hidden = 32, classes = 4, depth = 2;
  std::uint64_t samples = 4096;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) user_fail("mixer", "{} needs a value (mixer --help lists the options)", k);
    const std::string v = argv[++i];
    if (k == "--config") a.config = v;
    else if (k == "--set") a.sets.push_back(v);
    else if (k == "--checkpoint-dir") a.sets.push_back("strata.checkpoint.dir=" + v);
    else if (k == "--resume") a.sets.push_back("strata.checkpoint.resume=" + v);
    else if (k == "--metrics") a.metrics = v;
    else if (k == "--exit-after-steps") a.exit_after_steps = std::stoll(v);
    else if (k == "--depth") a.depth = std::stoi(v);
    else user_fail("mixer", "unknown option {} (mixer --help lists the options)", k);
  }
  if (a.config.empty()) user_fail("mixer", "--config FILE is required");
  return a;
}

int run(const Args& a) {
  // The GPT's sections describe train_gpt's model and text data, not this one: refuse them.
  const config::json doc = config::read_config_file(a.config);
  for (const char* k : {"model", "data", "eval", "sample"})
    if (doc.contains("strata") && doc["strata"].contains(k))
      user_fail("mixer", "{}: strata.{} describes train_gpt's GPT; remove it", a.config, k);
  config::Config cfg = config::load_config(a.config, a.sets);  // validated: unknown keys are errors
  parallel::InitOptions init;  // the ranks strata run started, with the config's comm timeout
  init.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.strata.comm.timeout_s * 1000));
  parallel::World world(init);
  train::apply_memory_caps(cfg, MemoryLedger::global());
  mixer::Mixer model(a.tokens, a.channels, a.hidden, a.classes, a.depth);
  parallel::Training job(cfg, world.group(), model);  // ZeRO, offload, optimizer, checkpoints
  const config::Config& c = job.config();
  mixer::Sequences data(a.tokens, a.channels, a.classes, a.samples, c.strata.seed,
                        static_cast<int>(c.train_micro_batch_size_per_gpu), job.dp().size(),
                        job.dp().rank());
  job.checkpoints().set_data(&data);  // the data position goes into checkpoints
  const bool lead = world.group().rank() == 0;
  if (lead)
    std::printf("mixer (Strata %s): %lld parameters on %d ranks, ZeRO stage %d\n",
                STRATA_VERSION_STRING, static_cast<long long>(job.store().total_numel()),
                world.group().size(), job.zero_stage());
  const std::int64_t start = job.checkpoints().resume();  // 0, or the step resumed from
  std::ofstream metrics;
  if (lead && !a.metrics.empty()) metrics.open(a.metrics, start > 0 ? std::ios::app : std::ios::trunc);
  std::int64_t step = start;
  bool stopped = false;
  while (step < c.strata.train_steps && !stopped) {
    const parallel::EngineStep es = job.step(data);
    ++step;
    if (lead) std::printf("step %lld | loss %.6f\n", static_cast<long long>(step), es.loss);
    if (metrics.is_open())
      metrics << "{\"step\": " << step << ", \"loss\": " << fmt::format("{:.17g}", es.loss)
              << ", \"grad_norm\": " << fmt::format("{:.17g}", es.result.grad_norm) << "}\n"
              << std::flush;
    stopped = a.exit_after_steps > 0 && step - start >= a.exit_after_steps;
    if (job.checkpoints().due(step) || (job.checkpoints().enabled() && (stopped || step == c.strata.train_steps)))
      job.checkpoints().save(step);
  }
  job.checkpoints().finish();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--help") {
    std::printf("mixer --config FILE [--set key=value]... [--checkpoint-dir DIR] [--resume auto|none|DIR]\n"
                "      [--metrics FILE] [--exit-after-steps N] [--depth N]\n");
    return 0;
  }
  try {
    return run(parse(argc, argv));
  } catch (const UserError& e) {  // bad input: one line saying what to change
    std::fprintf(stderr, "mixer: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixer: error: %s\n", e.what());
    return 3;
  }
}
