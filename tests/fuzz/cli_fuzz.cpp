// cli_fuzz: a bounded, reproducible fuzz of what users hand Strata's programs — config files,
// --set values, command lines, damaged checkpoints and Hugging Face files — run as a test. A few
// hundred mutations from a fixed seed; each run of `strata` or train_gpt must end by itself (no
// signal, no timeout) with a status of the exit-status table that means "your input" (never 3: an
// internal error for input is a bug; see docs/exit-codes.md), and say so on stderr in a bounded
// number of bytes (no echo of a huge input).
// usage: cli_fuzz STRATA TRAIN_GPT [--seed N] [--cases N]   (FUZZ_KEEP=1 keeps the work directory)
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Result {
  bool signaled = false;
  bool timed_out = false;
  int code = 0;
  std::string err;  // stderr, whole
};

// Runs argv with stdout discarded and stderr captured, killing it after `timeout`.
Result run(const std::vector<std::string>& argv, const std::string& cwd,
           std::chrono::seconds timeout = std::chrono::seconds(60)) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) std::abort();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(pipe_fds[1], 2);
    ::close(pipe_fds[0]);
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  Result r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    char buf[65536];
    ssize_t n;
    while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0)
      r.err.append(buf, static_cast<std::size_t>(n));
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  char buf[65536];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0)
    r.err.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  r.signaled = WIFSIGNALED(status);
  r.code = r.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
  return r;
}

std::string shorten(const std::string& s, std::size_t n = 300) {
  std::string out = s.size() > n ? s.substr(0, n) + fmt::format("... ({} bytes)", s.size()) : s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 32 && c != '\n') c = '?';
  return out;
}

class Fuzzer {
 public:
  Fuzzer(std::string strata, std::string train_gpt, std::uint64_t seed, std::string work)
      : strata_(std::move(strata)),
        train_gpt_(std::move(train_gpt)),
        rng_(seed),
        work_(std::move(work)) {}

  int failures() const { return failures_; }
  int runs() const { return runs_; }

  // One program run: checks the outcome against the allowed statuses and the stderr bound.
  void check(const std::string& what, const std::vector<std::string>& argv,
             const std::set<int>& allowed, std::size_t max_err = 4096) {
    const Result r = run(argv, work_);
    ++runs_;
    std::string problem;
    if (r.timed_out)
      problem = "did not finish within 60 s";
    else if (r.signaled)
      problem = fmt::format("killed by signal {}", r.code);
    else if (!allowed.count(r.code))
      problem = fmt::format("exit status {}", r.code);
    else if (r.err.size() > max_err)
      problem = fmt::format("{} bytes on stderr (at most {})", r.err.size(), max_err);
    if (problem.empty()) return;
    ++failures_;
    std::string cmd;
    for (const auto& a : argv) cmd += " " + shorten(a, 120);
    fmt::print("FAIL {}: {}\n  command:{}\n  stderr: {}\n", what, problem, cmd,
               shorten(r.err, 600));
    if (std::getenv("FUZZ_KEEP") && fs::exists(fs::path(work_) / "bad")) {  // for a closer look
      const fs::path keep = fs::path(work_) / fmt::format("failure_{}", failures_);
      fs::copy(fs::path(work_) / "bad", keep, fs::copy_options::recursive);
      fmt::print("  damaged checkpoint kept in {}\n", keep.string());
    }
    std::fflush(stdout);
  }

  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

  // A value users might type (or a hostile one).
  std::string value_text() {
    static const std::vector<std::string> pool = {"0",
                                                  "1",
                                                  "-1",
                                                  "2",
                                                  "3",
                                                  "nan",
                                                  "NaN",
                                                  "inf",
                                                  "-inf",
                                                  "1e300",
                                                  "1e-320",
                                                  "1e400",
                                                  "9223372036854775807",
                                                  "9223372036854775808",
                                                  "18446744073709551616",
                                                  "0.5",
                                                  "-0.0",
                                                  "true",
                                                  "false",
                                                  "null",
                                                  "[]",
                                                  "{}",
                                                  "[1,2]",
                                                  "{\"a\":1}",
                                                  "\"\"",
                                                  "\"x\"",
                                                  "\"",
                                                  "{",
                                                  "[",
                                                  "]",
                                                  "}",
                                                  "x",
                                                  "",
                                                  "2GiB",
                                                  "-2GiB",
                                                  "1e3MiB",
                                                  "lots",
                                                  "0x10",
                                                  "1_000",
                                                  "AdamW",
                                                  "adamw",
                                                  "cpu",
                                                  "nvme",
                                                  "auto",
                                                  "none",
                                                  "/dev/full",
                                                  "/proc/strata-fuzz",
                                                  "/nonexistent/x",
                                                  ".",
                                                  "..",
                                                  "config.json"};
    switch (below(8)) {
      case 0:
        return std::string(1 + below(5000), "a0[{\"9.e-"[below(10)]);
      case 1:
        return std::string(1 + below(3000), '[') + std::string(below(2) ? 1 + below(3000) : 0, ']');
      case 2:
        return "1" + std::string(1 + below(400), '0');
      default:
        return pick(pool);
    }
  }

  json value_json() {
    const std::string t = value_text();
    if (t.size() < 200 && json::accept(t)) return json::parse(t);
    return t;
  }

  // Structure-aware and byte-level mutations of a config.
  std::string mutate(json doc) {
    const int rounds = 1 + static_cast<int>(below(3));
    for (int i = 0; i < rounds; ++i) {
      json* node = &doc;
      std::vector<std::string> path;
      while (node->is_object() && !node->empty() && below(3) != 0) {
        auto it = node->begin();
        std::advance(it, static_cast<long>(below(node->size())));
        path.push_back(it.key());
        node = &it.value();
      }
      switch (below(6)) {
        case 0:
          *node = value_json();
          break;
        case 1:
          if (node->is_object() && !node->empty()) {
            auto it = node->begin();
            std::advance(it, static_cast<long>(below(node->size())));
            node->erase(it);
          }
          break;
        case 2:
          if (node->is_object()) (*node)[value_text().substr(0, 40)] = value_json();
          break;
        case 3:
          if (node->is_object() && !node->empty()) {  // a typo in a key
            auto it = node->begin();
            std::advance(it, static_cast<long>(below(node->size())));
            std::string k = it.key();
            json v = it.value();
            node->erase(it);
            if (k.size() > 1) std::swap(k[below(k.size())], k[below(k.size())]);
            (*node)[k + (below(2) ? "" : "s")] = v;
          }
          break;
        default:
          *node = value_json();
      }
    }
    std::string text = doc.dump(below(2) ? -1 : 2);
    switch (below(6)) {  // byte level
      case 0:
        if (!text.empty()) text[below(text.size())] = static_cast<char>(below(256));
        break;
      case 1:
        text.resize(below(text.size() + 1));
        break;
      case 2:
        text.insert(below(text.size() + 1), value_text());
        break;
      default:
        break;
    }
    return text;
  }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(fs::path(work_) / name, std::ios::binary) << text;
  }

  std::string strata_, train_gpt_;
  std::mt19937_64 rng_;
  std::string work_;
  int failures_ = 0, runs_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: cli_fuzz STRATA TRAIN_GPT [--seed N] [--cases N]\n");
    return 2;
  }
  std::uint64_t seed = 18;
  int cases = 300;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    if (k == "--cases") cases = std::atoi(argv[i + 1]);
  }
  const std::string strata = fs::absolute(argv[1]).string(),
                    train_gpt = fs::absolute(argv[2]).string();
  std::string pattern = (fs::temp_directory_path() / "strata-fuzz-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) return 2;
  const std::string work = pattern;
  Fuzzer f(strata, train_gpt, seed, work);
  fmt::print("cli_fuzz: seed {}, {} config cases, work in {}\n", seed, cases, work);

  // A tiny corpus, a config that trains on it in a moment, and a checkpoint of it.
  {
    std::string corpus;
    for (int i = 0; i < 200; ++i) corpus += fmt::format("line {}: the quick brown fox\n", i);
    f.write("corpus.txt", corpus);
  }
  const json base = json::parse(R"({
    "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "betas": [0.9, 0.95]}},
    "zero_optimization": {"stage": 1},
    "strata": {"seed": 3, "train_steps": 2,
               "model": {"type": "gpt", "n_layer": 1, "n_head": 1, "n_embd": 16, "block_size": 16, "vocab_size": 256},
               "data": {"train": "tiny.train.tok"}, "sample": {"tokens": 0},
               "checkpoint": {"dir": "ck", "interval": 1}}})");
  f.write("config.json", base.dump(2));
  const Result prep =
      run({strata, "data", "prepare", "--input", "corpus.txt", "--output", "tiny"}, work);
  const Result train = run({train_gpt, "--config", "config.json", "--threads", "1"}, work);
  if (prep.code != 0 || train.code != 0 || prep.signaled || train.signaled) {
    fmt::print("cli_fuzz: set-up failed: {} {}\n", shorten(prep.err), shorten(train.err));
    return 1;
  }
  const std::set<int> input{0, 1, 2}, job{0, 1, 2, 7};

  // 1. Config files: `strata config check` always, train_gpt on some (memory capped: an absurd
  // model is an out-of-memory error, 7, not an hour of work).
  for (int i = 0; i < cases; ++i) {
    const std::string name = fmt::format("fuzz_{}.json", i % 8);
    f.write(name, f.mutate(base));
    f.check(fmt::format("config case {}", i), {strata, "config", "check", name}, input);
    if (i % 10 == 0)
      f.check(
          fmt::format("train_gpt config case {}", i),
          {train_gpt, "--config", name, "--threads", "1", "--device-memory", "64MiB", "--resume",
           "none", "--set", "strata.checkpoint.dir=fuzz_ck", "--set", "strata.train_steps=1"},
          job, 16384);
  }
  // 2. --set values and command lines.
  const std::vector<std::string> keys = {"train_micro_batch_size_per_gpu",
                                         "gradient_accumulation_steps",
                                         "zero_optimization.stage",
                                         "strata.train_steps",
                                         "strata.seed",
                                         "strata.model.n_embd",
                                         "strata.memory.device_limit",
                                         "optimizer.params.lr",
                                         "optimizer.params.betas",
                                         "strata.checkpoint.resume",
                                         "strata.data.train",
                                         "strata.nope",
                                         "fp16.enabled",
                                         "scheduler.type"};
  const std::vector<std::string> run_opts = {"-n",
                                             "--restart-delay",
                                             "--watchdog",
                                             "--kill-grace",
                                             "--watchdog-startup",
                                             "--max-restarts",
                                             "--host",
                                             "--env",
                                             "--log-dir"};
  const std::vector<std::string> paths = {
      "ck",   "ck/step_00000002", "config.json", "/dev/full",      "/proc/strata-fuzz",
      "nope", "corpus.txt",       ".",           "tiny.train.tok", "/dev/null"};
  for (int i = 0; i < cases / 2; ++i) {
    std::vector<std::string> a = {strata, "config", "check", "config.json"};
    for (int k = 0; k < 1 + static_cast<int>(f.below(3)); ++k) {
      a.push_back("--set");
      a.push_back(f.pick(keys) + "=" + f.value_text());
    }
    if (f.below(3) == 0) {
      a.push_back(f.below(2) ? "--device-memory" : "--world-size");
      a.push_back(f.value_text());
    }
    f.check(fmt::format("--set case {}", i), a, input);

    std::vector<std::string> r = {strata, "run"};
    for (int k = 0; k < 1 + static_cast<int>(f.below(3)); ++k) {
      r.push_back(f.pick(run_opts));
      r.push_back(f.value_text());
    }
    r.insert(r.end(), {"--dry-run", "--", "/bin/true"});
    f.check(fmt::format("run case {}", i), r, input);

    const std::vector<std::vector<std::string>> ckpt = {
        {strata, "ckpt", "inspect", f.pick(paths)},
        {strata, "ckpt", "verify", f.pick(paths)},
        {strata, "ckpt", "export", f.pick(paths), "--output", f.pick(paths)},
        {strata, "data", "inspect", f.pick(paths)},
        {strata, f.value_text(), f.value_text()}};
    f.check(fmt::format("command case {}", i), f.pick(ckpt), input);
  }
  // 3. Damaged checkpoints: random bytes of a rank file or the manifest changed, then read by
  // verify, inspect, export and a resume.
  for (int i = 0; i < cases / 10; ++i) {
    fs::remove_all(fs::path(work) / "bad");
    fs::copy(fs::path(work) / "ck", fs::path(work) / "bad", fs::copy_options::recursive);
    const fs::path victim = fs::path(work) / "bad" / "step_00000002" /
                            (f.below(3) == 0 ? "manifest.json" : "rank_00000.h5");
    std::string bytes;
    {
      std::ifstream in(victim, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      bytes = ss.str();
    }
    for (int k = 0; k < 1 + static_cast<int>(f.below(8)); ++k) {
      if (bytes.empty()) break;
      const std::size_t at =
          f.below(2) ? f.below(std::min<std::size_t>(bytes.size(), 4096)) : f.below(bytes.size());
      bytes[at] = static_cast<char>(f.below(256));
    }
    if (f.below(5) == 0) bytes.resize(f.below(bytes.size()));
    std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes;
    f.check(fmt::format("damaged checkpoint {} (verify)", i), {strata, "ckpt", "verify", "bad"},
            {0, 1});
    f.check(fmt::format("damaged checkpoint {} (inspect)", i),
            {strata, "ckpt", "inspect", "bad/step_00000002"}, {0, 1});
    f.check(fmt::format("damaged checkpoint {} (export)", i),
            {strata, "ckpt", "export", "bad", "--output", "bad.h5"}, {0, 1});
    if (i % 3 == 0)
      f.check(
          fmt::format("damaged checkpoint {} (resume)", i),
          {train_gpt, "--config", "config.json", "--threads", "1", "--resume", "bad/step_00000002",
           "--set", "strata.checkpoint.dir=bad", "--set", "strata.train_steps=3"},
          job, 16384);
  }
  // 4. Damaged Hugging Face files (model.safetensors, mostly its JSON header, or config.json) of
  // an export, imported.
  const Result hf = run({strata, "ckpt", "export", "ck", "--output", "hf"}, work);
  if (hf.code != 0 || hf.signaled) {
    fmt::print("cli_fuzz: the Hugging Face export failed: {}\n", shorten(hf.err));
    return 1;
  }
  for (int i = 0; i < cases / 10; ++i) {
    for (const char* d : {"badhf", "imported"}) fs::remove_all(fs::path(work) / d);
    fs::copy(fs::path(work) / "hf", fs::path(work) / "badhf", fs::copy_options::recursive);
    const fs::path victim =
        fs::path(work) / "badhf" / (f.below(4) == 0 ? "config.json" : "model.safetensors");
    std::string bytes;
    {
      std::ifstream in(victim, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      bytes = ss.str();
    }
    for (int k = 0; k < 1 + static_cast<int>(f.below(8)); ++k) {
      if (bytes.empty()) break;
      const std::size_t at =
          f.below(4) ? f.below(std::min<std::size_t>(bytes.size(), 1024)) : f.below(bytes.size());
      bytes[at] = static_cast<char>(f.below(2) ? f.below(256) : "[{]}\"0-9e"[f.below(10)]);
    }
    if (f.below(5) == 0) bytes.resize(f.below(bytes.size()));
    std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes;
    f.check(fmt::format("damaged Hugging Face files {} (import)", i),
            {strata, "ckpt", "import", "badhf", "--output", "imported"}, {0, 1});
  }
  fmt::print("cli_fuzz: {} runs, {} failures\n", f.runs(), f.failures());
  if (!std::getenv("FUZZ_KEEP")) fs::remove_all(work);
  return f.failures() == 0 ? 0 : 1;
}
