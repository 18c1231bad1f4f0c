// strata plot: a picture of a run from train_gpt's --metrics JSON lines (docs/metrics.md) —
// loss and validation loss, learning rate, tokens/s and peak memory per tier × category over
// steps, per rank where the metrics come from several ranks — drawn by gnuplot into a PNG
// (pngcairo) or an SVG, chosen by the output's extension.
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/core/json_limits.hpp"
#include "launcher/commands.hpp"

extern char** environ;

namespace strata::launcher {

namespace {

namespace fs = std::filesystem;
using metrics_json = nlohmann::json;

struct Point {
  std::int64_t step = 0;
  double loss = 0, lr = NAN, tokens_per_s = NAN;
  std::optional<double> val_loss;
  std::map<std::string, double> peak;  // "device params" → peak bytes
};

// rank → step → point (a step seen twice, as after a restart from an older checkpoint, keeps the
// later line).
using Series = std::map<int, std::map<std::int64_t, Point>>;

[[noreturn]] void bad_line(const std::string& file, std::size_t line, const std::string& what) {
  user_fail("plot", "{}:{}: {}", file, line, what);
}

double number(const metrics_json& j, const char* key, const std::string& file, std::size_t line,
              bool required) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) bad_line(file, line, fmt::format("no \"{}\": not a train_gpt metrics line", key));
    return NAN;
  }
  if (!it->is_number())
    bad_line(file, line, fmt::format("\"{}\" is {}, not a number", key, it->dump()));
  return it->get<double>();
}

void read_metrics(const std::string& file, Series& out) {
  std::ifstream in(file);
  if (!in) user_fail("plot", "cannot open '{}'", file);
  std::string text;
  std::size_t lines = 0;
  for (std::size_t no = 1; std::getline(in, text); ++no) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    metrics_json j;
    check_json_limits(text, fmt::format("{} line {}", file, no), "plot");  // depth, number sizes
    try {
      j = metrics_json::parse(text);
    } catch (const metrics_json::exception& e) {
      bad_line(file, no, fmt::format("not JSON ({})", e.what()));
    }
    if (!j.is_object()) bad_line(file, no, "not a JSON object");
    Point p;
    const auto step = j.find("step");
    if (step == j.end() || !step->is_number_integer() || step->get<std::int64_t>() < 0)
      bad_line(file, no, "no non-negative integer \"step\": not a train_gpt metrics line");
    p.step = step->get<std::int64_t>();
    p.loss = number(j, "loss", file, no, true);
    p.lr = number(j, "lr", file, no, false);
    p.tokens_per_s = number(j, "tokens_per_s", file, no, false);
    if (const double v = number(j, "val_loss", file, no, false); !std::isnan(v)) p.val_loss = v;
    int rank = 0;
    if (const auto r = j.find("rank"); r != j.end()) {
      if (!r->is_number_integer() || r->get<std::int64_t>() < 0)
        bad_line(file, no, fmt::format("\"rank\" is {}, not a rank", r->dump()));
      rank = r->get<int>();
    }
    if (const auto m = j.find("memory"); m != j.end()) {
      if (!m->is_object()) bad_line(file, no, "\"memory\" is not an object");
      for (const auto& [tier, cats] : m->items()) {
        if (!cats.is_object()) bad_line(file, no, fmt::format("memory.{} is not an object", tier));
        for (const auto& [cat, v] : cats.items()) {
          if (cat == "total") continue;
          if (!v.is_object() || !v.contains("peak") || !v["peak"].is_number())
            bad_line(file, no, fmt::format("memory.{}.{} has no numeric \"peak\"", tier, cat));
          p.peak[tier + " " + cat] = v["peak"].get<double>();
        }
      }
    }
    out[rank][p.step] = std::move(p);
    ++lines;
  }
  if (in.bad()) user_fail("plot", "reading '{}' failed", file);
  if (lines == 0)
    user_fail("plot", "{}: no metrics lines (write them with train_gpt --metrics FILE)", file);
}

// 'text' for a gnuplot string: single quotes, a quote doubled.
std::string gp_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string value(double v) {
  return std::isnan(v) ? "?" : fmt::format("{:.9g}", v);
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "strata-plot-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) user_fail("plot", "cannot create a temporary directory");
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& n) const { return (fs::path(path) / n).string(); }
};

// Runs `gnuplot script` with output and errors into `log`; returns the wait status.
int run_gnuplot(const std::string& gnuplot, const std::string& script, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv{const_cast<char*>(gnuplot.c_str()), const_cast<char*>(script.c_str()),
                          nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, gnuplot.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc == ENOENT)
    user_fail("plot",
              "'{}' was not found on PATH: install gnuplot (Debian: apt-get install "
              "gnuplot-nox; scripts/setup does)",
              gnuplot);
  if (rc != 0) user_fail("plot", "cannot start '{}': {}", gnuplot, std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

struct PlotArgs {
  std::vector<std::string> inputs;
  std::string output, title, gnuplot = "gnuplot";
  int width = 1200, height = 900;
};

void plot(const PlotArgs& a) {
  const std::string ext = fs::path(a.output).extension().string();
  std::string terminal;
  if (ext == ".png")
    terminal = fmt::format("pngcairo size {},{} noenhanced font ',10'", a.width, a.height);
  else if (ext == ".svg")
    terminal = fmt::format("svg size {},{} dynamic noenhanced font 'sans,11' background '#ffffff'",
                           a.width, a.height);
  else
    user_fail("plot", "'{}': the output must end in .png or .svg", a.output);

  Series s;
  for (const auto& f : a.inputs) read_metrics(f, s);
  TempDir tmp;
  std::set<std::string> mem_keys;
  for (const auto& [rank, pts] : s)
    for (const auto& [step, p] : pts)
      for (const auto& [k, v] : p.peak)
        if (v > 0) mem_keys.insert(k);
  for (const auto& [rank, pts] : s) {
    std::ofstream d(tmp / fmt::format("r{}.dat", rank)), m(tmp / fmt::format("r{}.mem.dat", rank));
    for (const auto& [step, p] : pts) {
      d << step << ' ' << value(p.loss) << ' ' << value(p.lr) << ' ' << value(p.tokens_per_s) << ' '
        << (p.val_loss ? value(*p.val_loss) : "?") << '\n';
      m << step;
      for (const auto& k : mem_keys) {
        const auto it = p.peak.find(k);
        m << ' ' << (it == p.peak.end() ? "?" : value(it->second / (1024.0 * 1024.0)));
      }
      m << '\n';
    }
  }

  const int lead = s.begin()->first;  // loss and lr are the job's: the lowest rank's lines
  const bool several = s.size() > 1;
  const std::string lead_dat = gp_string(tmp / fmt::format("r{}.dat", lead));
  std::string title = a.title;
  if (title.empty()) {
    for (const auto& f : a.inputs)
      title += (title.empty() ? "" : ", ") + fs::path(f).filename().string();
    title += fmt::format(
        " ({} steps{})", s.at(lead).size(),
        several ? fmt::format(", ranks {}-{}", s.begin()->first, s.rbegin()->first) : "");
  }
  const std::string out_tmp = a.output + ".tmp";
  std::string g;
  g += fmt::format("set terminal {}\nset output {}\n", terminal, gp_string(out_tmp));
  g += "set datafile missing '?'\nset grid\nset key top right\nset xlabel 'step'\n";
  g += "set style line 1 lw 2 lc rgb '#1f77b4'\nset style line 2 lw 2 pt 7 ps 0.8 lc rgb "
       "'#d62728'\n";
  g += fmt::format("set multiplot layout 2,2 title {}\n", gp_string(title));
  g += "set title 'loss'\nset ylabel 'cross-entropy'\n";
  g += fmt::format(
      "plot {0} using 1:2 with lines ls 1 title 'train', {0} using 1:5 with "
      "linespoints ls 2 title 'validation'\n",
      lead_dat);
  g += "set title 'learning rate'\nset ylabel 'lr'\nset format y '%.1e'\n";
  g += fmt::format("plot {} using 1:3 with lines ls 1 title 'lr'\nset format y '%g'\n", lead_dat);
  g += "set title 'throughput'\nset ylabel 'tokens/s'\nplot ";
  std::string sep;
  for (const auto& [rank, pts] : s) {
    g += fmt::format("{}{} using 1:4 with lines lw 2 title {}", sep,
                     gp_string(tmp / fmt::format("r{}.dat", rank)),
                     gp_string(several ? fmt::format("rank {}", rank) : std::string("tokens/s")));
    sep = ", ";
  }
  // Memory: one colour per tier × category, one dash pattern per rank (titled once).
  g +=
      "\nset title 'memory: peak per step'\nset ylabel 'MiB'\nset key below horizontal font ',9'\n";
  if (mem_keys.empty()) {
    g += "set label 1 'no memory fields in the metrics' at graph 0.5,0.5 center\n"
         "plot [0:1] [0:1] NaN notitle\n";
  } else {
    static const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    g += "plot ";
    sep.clear();
    for (const auto& [rank, pts] : s) {
      const bool first = rank == lead;
      int col = 2;
      for (const auto& k : mem_keys) {
        const std::string t = first      ? gp_string(k)
                              : col == 2 ? gp_string(fmt::format("rank {}: dashes", rank))
                                         : std::string("notitle");
        g += fmt::format("{}{} using 1:{} with lines lw 2 dt {} lc rgb '{}' {}", sep,
                         gp_string(tmp / fmt::format("r{}.mem.dat", rank)), col,
                         first ? 1 : 2 + (rank - lead - 1) % 4, kColours[(col - 2) % 10],
                         t == "notitle" ? t : "title " + t);
        ++col;
        sep = ", ";
      }
    }
    g += "\n";
  }
  g += "unset multiplot\nset output\n";
  const std::string script = tmp / "plot.gp";
  std::ofstream(script) << g;

  const std::string log = tmp / "gnuplot.log";
  const int status = run_gnuplot(a.gnuplot, script, log);
  std::error_code ec;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(out_tmp, ec) ||
      fs::file_size(out_tmp, ec) == 0) {
    std::ifstream l(log);
    std::string first, line;
    while (std::getline(l, line))
      if (line.find_first_not_of(" ^") != std::string::npos) first = line;  // the last message
    fs::remove(out_tmp, ec);
    user_fail("plot", "gnuplot failed ({}): {}",
              WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status)) : "killed",
              first.empty() ? "no output written" : first);
  }
  fs::rename(out_tmp, a.output, ec);
  if (ec) user_fail("plot", "cannot rename '{}' to '{}': {}", out_tmp, a.output, ec.message());
  fmt::print("wrote {} ({} bytes): {} rank{}, {} steps, {} memory series\n", a.output,
             fs::file_size(a.output), s.size(), several ? "s" : "", s.at(lead).size(),
             mem_keys.size() * s.size());
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  auto* cmd = app.add_subcommand(
      "plot",
      "Draw a run from train_gpt --metrics files: loss and validation loss, learning rate, "
      "tokens/s and peak memory per tier x category over steps (per rank when several)");
  cmd->add_option("metrics", a->inputs,
                  "Metrics files (JSON lines; one per rank with --metrics 'm.{rank}.jsonl')")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--output,-o", a->output, "The picture: NAME.png or NAME.svg")->required();
  cmd->add_option("--title", a->title, "Title (default: the files' names and the step count)");
  cmd->add_option("--width", a->width, "Width in pixels")
      ->capture_default_str()
      ->check(CLI::Range(300, 8000));
  cmd->add_option("--height", a->height, "Height in pixels")
      ->capture_default_str()
      ->check(CLI::Range(200, 8000));
  cmd->add_option("--gnuplot", a->gnuplot, "The gnuplot program")->capture_default_str();
  cmd->callback([a] { plot(*a); });
}

}  // namespace strata::launcher
