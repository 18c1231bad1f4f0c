// check_config: DeepSpeed aliases and "auto" values, schema check, typed reads with range checks,
// cross-field rules; every problem collected.
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "framework/config/auto_values.hpp"
#include "framework/config/config.hpp"
#include "framework/config/deepspeed_keys.hpp"
#include "framework/config/schema.hpp"
#include "framework/config/suggest.hpp"
#include "framework/config/validate.hpp"
#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"

namespace strata::config {

namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();
// Hugging Face TrainingArguments.per_device_train_batch_size default (an "auto" micro-batch).
constexpr std::int64_t kHfMicroBatch = 8;

struct IntRange {
  std::int64_t lo = 0, hi = kMaxInt;
  std::string describe() const {
    if (hi == kMaxInt) return fmt::format("an integer >= {}", lo);
    return fmt::format("an integer from {} to {}", lo, hi);
  }
};

struct NumRange {
  double lo = 0, hi = INFINITY;
  bool lo_open = false, hi_open = false;
  std::string describe() const {
    if (std::isinf(hi)) return fmt::format("a number {} {}", lo_open ? ">" : ">=", lo);
    return fmt::format("a number in {}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  }
  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
};

constexpr NumRange kNonNegative{0, INFINITY, false, false};
constexpr NumRange kPositive{0, INFINITY, true, false};
constexpr NumRange kUnit{0, 1, false, false};     // [0, 1]
constexpr NumRange kUnitOpen{0, 1, false, true};  // [0, 1)

template <typename E>
using Options = std::initializer_list<std::pair<std::string_view, E>>;

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Typed, range-checked reads of a document that check_structure has already looked at. A key
// with a problem is not read (its default stays); a value out of range is a problem.
class Reader {
 public:
  Reader(const json& root, Problems& problems) : root_(root), problems_(problems) {}

  const json* at(std::string_view path) const {
    const json* cur = &root_;
    while (!path.empty()) {
      const auto dot = path.find('.');
      const std::string key(path.substr(0, dot));
      if (!cur->is_object()) return nullptr;
      auto it = cur->find(key);
      if (it == cur->end()) return nullptr;
      cur = &*it;
      path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
    }
    return cur;
  }
  // Given (not null) and without a problem.
  bool has(std::string_view path) const {
    const json* v = at(path);
    return v && !v->is_null() && !problems_.about(path);
  }
  Problems& problems() const { return problems_; }

  void get(std::string_view path, bool& out) const {
    if (has(path)) out = at(path)->get<bool>();
  }
  bool get(std::string_view path, std::int64_t& out, IntRange r = {}) const {
    if (!has(path)) return false;
    const json& v = *at(path);
    const std::int64_t x =
        v.is_number_integer() ? v.get<std::int64_t>() : static_cast<std::int64_t>(v.get<double>());
    if ((v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxInt)) ||
        x < r.lo || x > r.hi)
      return out_of_range(path, v, r.describe());
    out = x;
    return true;
  }
  void get(std::string_view path, int& out, IntRange r) const {
    std::int64_t x = out;
    if (get(path, x, r)) out = static_cast<int>(x);
  }
  void get(std::string_view path, std::uint64_t& out) const {
    std::int64_t x = static_cast<std::int64_t>(out);
    if (get(path, x, IntRange{0, kMaxInt})) out = static_cast<std::uint64_t>(x);
  }
  void get(std::string_view path, double& out, NumRange r) const {
    if (!has(path)) return;
    const json& v = *at(path);
    const double x = v.get<double>();
    if (!r.contains(x)) {
      out_of_range(path, v, r.describe());
      return;
    }
    out = x;
  }
  void get(std::string_view path, std::array<double, 2>& out, NumRange r) const {
    if (!has(path)) return;
    const json& v = *at(path);
    for (std::size_t i = 0; i < 2; ++i) {
      if (!r.contains(v[i].get<double>())) {
        problems_.mistake(std::string(path), "{} is {}; allowed: two numbers, each {}", path,
                          v.dump(), r.describe().substr(std::string_view("a number ").size()));
        return;
      }
    }
    out = {v[0].get<double>(), v[1].get<double>()};
  }
  // Optional strings: null or absent leaves out unchanged; "" is refused (use null).
  void get(std::string_view path, std::string& out) const {
    if (!has(path)) return;
    const json& v = *at(path);
    if (v.get<std::string>().empty()) {
      problems_.mistake(std::string(path), "{} is \"\"; allowed: a non-empty string{}", path,
                        find_key(path)->nullable ? " or null" : "");
      return;
    }
    out = v.get<std::string>();
  }
  void get_size(std::string_view path, std::optional<std::uint64_t>& out) const {
    if (!has(path)) return;
    const json& v = *at(path);
    if (v.is_string())
      out = parse_bytes(v.get<std::string>());  // check_structure: it parses
    else if (v.is_number_integer())
      out = v.get<std::uint64_t>();  // check_structure: >= 0
    else
      out = static_cast<std::uint64_t>(v.get<double>());
  }
  // A string naming one of options, any letter case; stored as the enum. False when it names
  // none (a problem) or is not given.
  template <typename E>
  bool choice(std::string_view path, E& out, Options<E> options) const {
    if (!has(path)) return false;
    const json& v = *at(path);
    const std::string text = lowercase(v.get<std::string>());
    std::vector<std::string> names;
    for (const auto& [name, value] : options) {
      if (lowercase(name) == text) {
        out = value;
        return true;
      }
      names.emplace_back(name);
    }
    std::string allowed;
    for (const auto& n : names) allowed += fmt::format("{}\"{}\"", allowed.empty() ? "" : ", ", n);
    const auto best = closest(v.get<std::string>(), names);
    problems_.mistake(std::string(path), "{} is {}; allowed: {}{}", path, v.dump(), allowed,
                      best ? fmt::format(" (did you mean \"{}\"?)", *best) : "");
    return false;
  }
  // Keys present under an object path (e.g. optimizer.params).
  std::vector<std::string> keys(std::string_view path) const {
    std::vector<std::string> out;
    if (const json* v = at(path); v && v->is_object())
      for (const auto& [k, _] : v->items()) out.push_back(k);
    return out;
  }

  bool out_of_range(std::string_view path, const json& v, const std::string& allowed) const {
    problems_.mistake(std::string(path), "{} is {}; allowed: {}", path, v.dump(), allowed);
    return false;
  }

 private:
  const json& root_;
  Problems& problems_;
};

// Judges every key of section.params that is not one of Strata's parameters of the chosen type:
// a DeepSpeed parameter of that type (beyond(name), a no-op or not implemented), a parameter of
// another type, or a mistake with the nearest parameter of this type. Returns false when a
// Strata parameter of the type should not be read (it had a problem).
void check_params(const Reader& r, std::string_view section, std::string_view type_name,
                  const std::vector<std::string_view>& allowed,
                  const std::function<const DeepSpeedKey*(std::string_view)>& beyond,
                  const std::vector<std::string>& beyond_names, std::vector<std::string>& notes) {
  const std::string params = fmt::format("{}.params", section);
  Problems& problems = r.problems();
  for (const auto& k : r.keys(params)) {
    const std::string path = params + "." + k;
    bool ok = false;
    for (auto a : allowed) ok |= a == k;
    if (ok) continue;
    if (allowed.size() == 0) {
      problems.mistake(path, "{} is given but {}.type is not set: {} needs a type", path, section,
                       params);
      continue;
    }
    if (const DeepSpeedKey* ds = beyond(k)) {
      judge_deepspeed_key(*ds, *r.at(path), *r.at(""), problems, notes);
      continue;
    }
    if (find_key(path)) {  // a parameter of another type
      problems.mistake(path, "{} is not a parameter of {}; {} takes: {}", path, type_name,
                       type_name, fmt::join(allowed, ", "));
      continue;
    }
    if (!key_hint(path).empty()) {
      problems.mistake(path, "{}", unknown_key_message(path));
      continue;
    }
    std::vector<std::string> candidates(allowed.begin(), allowed.end());
    candidates.insert(candidates.end(), beyond_names.begin(), beyond_names.end());
    if (const auto best = closest(k, candidates))
      problems.mistake(path, "unknown key '{}'; did you mean '{}.{}'?", path, params, *best);
    else
      problems.mistake(path, "unknown key '{}': not a parameter of {}; {} takes: {}", path,
                       type_name, type_name, fmt::join(allowed, ", "));
  }
}

const DeepSpeedKey* no_params(std::string_view) {
  return nullptr;
}

// section.type: one of Strata's types (true), or a problem and false: a DeepSpeed type Strata
// does not implement (deepspeed_type names it) or a mistake. Then the type's parameters mean
// nothing to Strata and are not looked at.
template <typename E>
bool read_type(const Reader& r, std::string_view section, E& out, Options<E> options,
               std::string_view (*deepspeed_type)(std::string_view)) {
  const std::string path = fmt::format("{}.type", section);
  if (r.has(path)) {
    const std::string given = r.at(path)->get<std::string>();
    if (const std::string_view what = deepspeed_type(given); !what.empty()) {
      std::string names;
      for (const auto& [name, value] : options)
        names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", name);
      r.problems().add(ProblemKind::not_implemented, path,
                       not_implemented(fmt::format("{}={}", path, r.at(path)->dump()), what,
                                       fmt::format("Strata's {} types are {}", section, names)));
      return false;
    }
  }
  const std::size_t before = r.problems().size();
  r.choice<E>(path, out, options);
  return r.problems().size() == before;
}

// The kind of value a parameter of this kind is (the schema's kind of optimizer.params.<name>
// covers every type's; this is the chosen type's).
bool is_kind(optim::HKind k, const json& v) {
  switch (k) {
    case optim::HKind::number:
    case optim::HKind::optional_number:
      return v.is_number();
    case optim::HKind::boolean:
      return v.is_boolean();
    case optim::HKind::integer:
      return kind_matches(Kind::integer, v);
    case optim::HKind::pair:
      return kind_matches(Kind::number_pair, v);
  }
  return false;
}

std::string_view kind_phrase(const optim::HParam& p) {
  if (!p.shape.empty()) return p.shape;
  switch (p.kind) {
    case optim::HKind::number:
      return "one number";
    case optim::HKind::boolean:
      return "true or false";
    case optim::HKind::integer:
      return "an integer";
    case optim::HKind::pair:
      return "a pair [a, b]";
    case optim::HKind::optional_number:
      return "a number or null";
  }
  return "?";
}

NumRange num_range(const optim::HRange& h) {
  return {h.lo, h.hi, h.lo_open, h.hi_open};
}

// One parameter of the chosen type, when given: its kind, then its range (Reader's messages).
void read_param(const Reader& r, const optim::OptimizerSpec& spec, const optim::HParam& p,
                optim::HValues& out) {
  const std::string path = fmt::format("optimizer.params.{}", p.name);
  if (!r.has(path)) return;
  const json& v = *r.at(path);
  if (!is_kind(p.kind, v)) {
    // Types whose parameter of this name is of the kind given (a value meant for another type).
    std::vector<std::string_view> others;
    for (const optim::OptimizerSpec* o : optim::optimizer_specs())
      if (const optim::HParam* q = o->find(p.name); q && q->kind != p.kind && is_kind(q->kind, v))
        others.push_back(o->name);
    std::string why;
    if (!others.empty() && others.size() <= 2)
      why = fmt::format(" ({}'s {} is {})", fmt::join(others, " and "), p.name,
                        v.is_array() ? "a pair" : "a number");
    r.problems().mistake(path, "{} is {}; {} takes {}{}", path, v.dump(), spec.name, kind_phrase(p),
                         why);
    return;
  }
  const std::string name(p.name);
  switch (p.kind) {
    case optim::HKind::number: {
      double x = out.number(name);
      r.get(path, x, num_range(p.range));
      out.set(name, x);
      break;
    }
    case optim::HKind::optional_number: {
      double x = 0;
      const std::size_t before = r.problems().size();
      r.get(path, x, num_range(p.range));
      if (r.problems().size() == before) out.set(name, std::optional<double>(x));
      break;
    }
    case optim::HKind::boolean: {
      bool x = out.flag(name);
      r.get(path, x);
      out.set(name, x);
      break;
    }
    case optim::HKind::integer: {
      std::int64_t x = out.integer(name);
      r.get(path, x,
            IntRange{static_cast<std::int64_t>(p.range.lo),
                     std::isinf(p.range.hi) ? kMaxInt : static_cast<std::int64_t>(p.range.hi)});
      out.set(name, x);
      break;
    }
    case optim::HKind::pair: {
      std::array<double, 2> x = out.pair(name);
      r.get(path, x, num_range(p.range));
      out.set(name, x);
      break;
    }
  }
}

// What a spec's check reports, as the config's problems about optimizer.params.<param>.
class ParamReport final : public optim::HReport {
 public:
  explicit ParamReport(const Reader& r) : r_(r) {}
  std::string path(std::string_view param) const override {
    return fmt::format("optimizer.params.{}", param);
  }
  bool given(std::string_view param) const override { return r_.has(path(param)); }
  bool ok(std::string_view param) const override { return !r_.problems().about(path(param)); }
  void mistake(std::string_view param, std::string message) override {
    r_.problems().add(ProblemKind::mistake, path(param), std::move(message));
  }
  void not_implemented(std::string_view param, std::string_view value, std::string what,
                       std::string fix) override {
    const std::string p = path(param);
    r_.problems().add(ProblemKind::not_implemented, p,
                      config::not_implemented(fmt::format("{}={}", p, value), what, fix));
  }

 private:
  const Reader& r_;
};

// optimizer.type: a registered type (any letter case), or a problem and nullptr: a DeepSpeed type
// Strata does not implement (deepspeed_optimizer names it) or a mistake. Absent: the default.
const optim::OptimizerSpec* read_optimizer_type(const Reader& r) {
  const std::string path = "optimizer.type";
  if (!r.has(path)) return &optim::optimizer_spec(kDefaultOptimizer);
  const std::string given = r.at(path)->get<std::string>();
  std::vector<std::string> names;
  std::string allowed;
  for (const optim::OptimizerSpec* s : optim::optimizer_specs()) {
    names.emplace_back(s->name);
    allowed += fmt::format("{}\"{}\"", allowed.empty() ? "" : ", ", s->name);
  }
  if (const std::string_view what = deepspeed_optimizer(given); !what.empty()) {
    r.problems().add(ProblemKind::not_implemented, path,
                     not_implemented(fmt::format("{}={}", path, r.at(path)->dump()), what,
                                     fmt::format("Strata's optimizer types are {}", allowed)));
    return nullptr;
  }
  if (const optim::OptimizerSpec* s = optim::find_optimizer_spec(given)) return s;
  const auto best = closest(given, names);
  r.problems().mistake(path, "{} is {}; allowed: {}{}", path, r.at(path)->dump(), allowed,
                       best ? fmt::format(" (did you mean \"{}\"?)", *best) : "");
  return nullptr;
}

// The optimizer block through its type's spec: the parameters it takes (others judged by
// check_params), each read by its kind and range, then the spec's own rules.
void read_optimizer(const Reader& r, Optimizer& o, std::vector<std::string>& notes) {
  const optim::OptimizerSpec* spec = read_optimizer_type(r);
  if (!spec) return;
  o = Optimizer(spec->name);
  std::vector<std::string_view> allowed;
  for (const optim::HParam& p : spec->params) allowed.push_back(p.name);
  std::vector<std::string> beyond_names(spec->deepspeed_params.begin(),
                                        spec->deepspeed_params.end());
  const auto beyond = [&](std::string_view k) -> const DeepSpeedKey* {
    for (std::string_view d : spec->deepspeed_params)
      if (d == k) return find_optimizer_param(k);
    return nullptr;
  };
  check_params(r, "optimizer", spec->name, allowed, beyond, beyond_names, notes);
  for (const optim::HParam& p : spec->params) read_param(r, *spec, p, o.params);
  if (spec->check) {
    ParamReport report(r);
    spec->check(o.params, report);
  }
}

void read_scheduler(const Reader& r, Scheduler& s, std::vector<std::string>& notes) {
  if (!read_type<SchedulerType>(r, "scheduler", s.type,
                                {{"WarmupLR", SchedulerType::warmup_lr},
                                 {"WarmupDecayLR", SchedulerType::warmup_decay_lr},
                                 {"WarmupCosineLR", SchedulerType::warmup_cosine_lr}},
                                deepspeed_scheduler))
    return;
  const std::string_view name = to_string(s.type);
  const std::vector<std::string> beyond_names{"last_batch_iteration"};
  const auto beyond = s.type == SchedulerType::none ? std::function(no_params)
                                                    : std::function(find_scheduler_param);
  switch (s.type) {
    case SchedulerType::none:
      check_params(r, "scheduler", name, {}, beyond, {}, notes);
      break;
    case SchedulerType::warmup_lr:
      check_params(r, "scheduler", name,
                   {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type"}, beyond,
                   beyond_names, notes);
      break;
    case SchedulerType::warmup_decay_lr:
      check_params(
          r, "scheduler", name,
          {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "total_num_steps"},
          beyond, beyond_names, notes);
      break;
    case SchedulerType::warmup_cosine_lr:
      check_params(r, "scheduler", name,
                   {"total_num_steps", "warmup_min_ratio", "warmup_num_steps", "cos_min_ratio",
                    "warmup_type"},
                   beyond, beyond_names, notes);
      break;
  }
  r.get("scheduler.params.warmup_min_lr", s.warmup_min_lr, kNonNegative);
  r.get("scheduler.params.warmup_max_lr", s.warmup_max_lr, kNonNegative);
  r.get("scheduler.params.warmup_num_steps", s.warmup_num_steps, IntRange{0});
  r.choice<WarmupType>("scheduler.params.warmup_type", s.warmup_type,
                       {{"log", WarmupType::log}, {"linear", WarmupType::linear}});
  r.get("scheduler.params.total_num_steps", s.total_num_steps, IntRange{1});
  r.get("scheduler.params.warmup_min_ratio", s.warmup_min_ratio, kUnit);
  r.get("scheduler.params.cos_min_ratio", s.cos_min_ratio, kUnit);
}

template <typename Offload>
void read_offload_common(const Reader& r, std::string_view section, Offload& o) {
  const std::string p(section);
  r.choice<OffloadDevice>(
      p + ".device", o.device,
      {{"none", OffloadDevice::none}, {"cpu", OffloadDevice::cpu}, {"nvme", OffloadDevice::nvme}});
  r.get(p + ".nvme_path", o.nvme_path);
  r.get(p + ".pin_memory", o.pin_memory);
  r.get(p + ".buffer_count", o.buffer_count, IntRange{1});
}

void read_zero(const Reader& r, Zero& z, std::vector<std::string>& notes) {
  r.get("zero_optimization.stage", z.stage, IntRange{0, 3});
  z.overlap_comm = z.stage == 3;
  r.get("zero_optimization.overlap_comm", z.overlap_comm);
  r.get("zero_optimization.reduce_scatter", z.reduce_scatter);
  std::int64_t bucket = z.reduce_bucket_size;
  if (r.get("zero_optimization.reduce_bucket_size", bucket, IntRange{0})) {
    if (bucket > 0) {
      z.reduce_bucket_size = bucket;
    } else if (z.stage == 0) {
      r.problems().add(
          ProblemKind::not_implemented, "zero_optimization.reduce_bucket_size",
          not_implemented("zero_optimization.reduce_bucket_size=0",
                          "each parameter's gradient reduced in a call of its own",
                          "Strata's stage 0 all-reduces a unit's gradients in buckets of at most "
                          "this many elements: give a positive count, e.g. 500000000 (DeepSpeed's "
                          "default)"));
    }
  }
  r.get("zero_optimization.allgather_partitions", z.allgather_partitions);
  r.get("zero_optimization.stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size,
        IntRange{0});
  r.get("zero_optimization.stage3_max_live_parameters", z.stage3_max_live_parameters, IntRange{1});
  r.get("zero_optimization.stage3_max_reuse_distance", z.stage3_max_reuse_distance, IntRange{0});
  r.get("zero_optimization.allgather_bucket_size", z.allgather_bucket_size, IntRange{1});
  r.get("zero_optimization.stage3_param_persistence_threshold",
        z.stage3_param_persistence_threshold, IntRange{0});
  read_offload_common(r, "zero_optimization.offload_optimizer", z.offload_optimizer);
  read_offload_common(r, "zero_optimization.offload_param", z.offload_param);
  r.get("zero_optimization.offload_param.buffer_size", z.offload_param.buffer_size, IntRange{1});
  r.get("zero_optimization.offload_param.max_in_cpu", z.offload_param.max_in_cpu, IntRange{0});

  // Keys given that change nothing at this stage, and values Strata has no algorithm for.
  if (r.problems().about("zero_optimization.stage")) return;
  for (const char* key :
       {"zero_optimization.reduce_bucket_size", "zero_optimization.reduce_scatter",
        "zero_optimization.allgather_partitions", "zero_optimization.stage3_prefetch_bucket_size",
        "zero_optimization.stage3_max_live_parameters", "zero_optimization.stage3_max_reuse_distance",
        "zero_optimization.allgather_bucket_size",
        "zero_optimization.stage3_param_persistence_threshold"}) {
    if (!r.has(key)) continue;
    if (const std::string why = unused_at_stage(key, z.stage); !why.empty())
      notes.push_back(
          fmt::format("ignored: {}={} at stage {}: {}", key, value_text(*r.at(key)), z.stage, why));
  }
  if (!z.reduce_scatter && z.stage >= 1)
    r.problems().add(ProblemKind::not_implemented, "zero_optimization.reduce_scatter",
                     not_implemented("zero_optimization.reduce_scatter=false",
                                     "gradients averaged with all-reduce at stages 1-3",
                                     "remove the key or set it to true"));
  if (!z.allgather_partitions && (z.stage == 1 || z.stage == 2))
    r.problems().add(ProblemKind::not_implemented, "zero_optimization.allgather_partitions",
                     not_implemented("zero_optimization.allgather_partitions=false",
                                     "updated parameters gathered with a series of broadcasts",
                                     "remove the key or set it to true"));
  z.reduce_scatter = true;
  z.allgather_partitions = true;
}
// DeepSpeed writes "" for an unset output_path: read as unset.
void read_monitor(const Reader& r, const std::string& name, Monitor& m) {
  r.get(name + ".enabled", m.enabled);
  const std::string path = name + ".output_path";
  if (const json* v = r.at(path); !(v && v->is_string() && v->get<std::string>().empty()))
    r.get(path, m.output_path);
  r.get(name + ".job_name", m.job_name);
}
// strata.activation_checkpointing: true/false (full/none, as before the modes), or a mode's name.
void read_recompute(const Reader& r, Recompute& out) {
  constexpr std::string_view path = "strata.activation_checkpointing";
  if (!r.has(path)) return;
  const json& v = *r.at(path);
  if (v.is_boolean()) {
    out = v.get<bool>() ? Recompute::full : Recompute::none;
    return;
  }
  const std::pair<std::string_view, Recompute> modes[] = {
      {"none", Recompute::none}, {"selective", Recompute::selective}, {"full", Recompute::full}};
  const std::string text = lowercase(v.get<std::string>());
  std::vector<std::string> names;
  for (const auto& [name, mode] : modes) {
    if (name == text) {
      out = mode;
      return;
    }
    names.emplace_back(name);
  }
  const auto best = closest(v.get<std::string>(), names);
  r.problems().mistake(std::string(path),
                       "{} is {}; allowed: true (= \"full\"), false (= \"none\"), \"none\", "
                       "\"selective\", \"full\"{}",
                       path, v.dump(), best ? fmt::format(" (did you mean \"{}\"?)", *best) : "");
}

void read_strata(const Reader& r, StrataSection& s) {
  r.get("strata.seed", s.seed);
  r.get("strata.train_steps", s.train_steps, IntRange{1});
  r.choice<std::optional<DeviceType>>(
      "strata.device", s.device,
      {{"auto", std::nullopt}, {"cpu", DeviceType::cpu}, {"cuda", DeviceType::cuda}});
  r.get("strata.tensor_parallel_size", s.tensor_parallel_size, IntRange{1});
  r.get("strata.pipeline_parallel_size", s.pipeline_parallel_size, IntRange{1});
  r.get("strata.virtual_pipeline_stages", s.virtual_pipeline_stages, IntRange{1});
  r.get("strata.sequence_parallel", s.sequence_parallel);
  read_recompute(r, s.activation_checkpointing);
  r.get("strata.optimizer_in_backward", s.optimizer_in_backward);
  r.get("strata.allow_tf32", s.allow_tf32);
  r.get("strata.allow_rounded_attention", s.allow_rounded_attention);
  r.choice<ActivationDtype>("strata.activation_dtype", s.activation_dtype,
                            {{"auto", ActivationDtype::automatic}, {"f32", ActivationDtype::f32}});

  r.get_size("strata.memory.device_limit", s.memory.device_limit);
  r.get_size("strata.memory.host_limit", s.memory.host_limit);
  r.get_size("strata.memory.nvme_limit", s.memory.nvme_limit);
  r.choice<OnOom>("strata.memory.on_oom", s.memory.on_oom,
                  {{"fail", OnOom::fail}, {"recover", OnOom::recover}});

  std::string model_type;
  r.get("strata.model.type", model_type);
  if (!model_type.empty() && lowercase(model_type) != "gpt")
    r.problems().mistake("strata.model.type", "strata.model.type is \"{}\"; allowed: \"gpt\"",
                         model_type);
  r.get("strata.model.n_layer", s.model.n_layer, IntRange{1});
  r.get("strata.model.n_head", s.model.n_head, IntRange{1});
  r.get("strata.model.n_embd", s.model.n_embd, IntRange{1});
  r.get("strata.model.block_size", s.model.block_size, IntRange{1});
  r.get("strata.model.vocab_size", s.model.vocab_size, IntRange{1});
  if (r.has("strata.model.dropout") && r.at("strata.model.dropout")->get<double>() != 0.0)
    r.problems().mistake("strata.model.dropout",
                         "strata.model.dropout is {}; allowed: 0 (Strata's GPT has no dropout yet)",
                         r.at("strata.model.dropout")->dump());

  r.get("strata.data.train", s.data.train);
  r.get("strata.data.valid", s.data.valid);
  r.get("strata.data.shuffle", s.data.shuffle);
  s.data.seed = s.seed;
  r.get("strata.data.seed", s.data.seed);

  r.get("strata.eval.interval", s.eval.interval, IntRange{0});
  r.get("strata.eval.iters", s.eval.iters, IntRange{1});

  r.get("strata.sample.tokens", s.sample.tokens, IntRange{0});
  r.get("strata.sample.temperature", s.sample.temperature, kPositive);
  r.get("strata.sample.top_k", s.sample.top_k, IntRange{0});

  r.get("strata.checkpoint.dir", s.checkpoint.dir);
  r.get("strata.checkpoint.interval", s.checkpoint.interval, IntRange{0});
  r.get("strata.checkpoint.save_total_limit", s.checkpoint.save_total_limit, IntRange{0});
  r.get("strata.checkpoint.keep_every", s.checkpoint.keep_every, IntRange{0});
  r.get("strata.checkpoint.async", s.checkpoint.async);
  r.get("strata.checkpoint.resume", s.checkpoint.resume);

  r.get("strata.comm.timeout_s", s.comm.timeout_s, kPositive);
}

}  // namespace

Config check_config(const json& input, Problems& problems) {
  Config c;
  json doc = input;
  apply_aliases(doc, problems, c.notes);
  const AutoBatch autos = resolve_auto(doc, problems, c.notes);
  check_structure(doc, problems, c.notes);
  if (!doc.is_object()) return c;
  const Reader r(doc, problems);
  r.get("train_batch_size", c.train_batch_size, IntRange{1});
  r.get("train_micro_batch_size_per_gpu", c.train_micro_batch_size_per_gpu, IntRange{1});
  r.get("gradient_accumulation_steps", c.gradient_accumulation_steps, IntRange{1});
  c.micro_batch_auto = autos.train_micro_batch_size_per_gpu;
  r.get("gradient_clipping", c.gradient_clipping, kNonNegative);
  r.get("prescale_gradients", c.prescale_gradients);
  r.get("gradient_predivide_factor", c.gradient_predivide_factor, kPositive);
  if (c.prescale_gradients && c.gradient_predivide_factor != 1.0)
    c.notes.push_back(fmt::format(
        "ignored: gradient_predivide_factor={}: with prescale_gradients true gradients are divided "
        "by the data-parallel size before the reduction and by nothing else (as DeepSpeed does)",
        c.gradient_predivide_factor));
  r.get("steps_per_print", c.steps_per_print, IntRange{1});
  r.get("wall_clock_breakdown", c.wall_clock_breakdown);

  r.get("fp16.enabled", c.fp16.enabled);
  r.get("fp16.loss_scale", c.fp16.loss_scale, kNonNegative);
  r.get("fp16.initial_scale_power", c.fp16.initial_scale_power, IntRange{0, 63});
  r.get("fp16.loss_scale_window", c.fp16.loss_scale_window, IntRange{1});
  r.get("fp16.hysteresis", c.fp16.hysteresis, IntRange{1});
  r.get("fp16.consecutive_hysteresis", c.fp16.consecutive_hysteresis);
  r.get("fp16.min_loss_scale", c.fp16.min_loss_scale, kPositive);
  r.get("fp16.auto_cast", c.fp16.auto_cast);
  if (c.fp16.auto_cast && !c.fp16.enabled)
    r.problems().mistake("fp16.auto_cast",
                         "fp16.auto_cast is true but fp16.enabled is not: auto_cast rounds the "
                         "model's inputs to fp16 only when training in fp16; set fp16.enabled to "
                         "true or remove fp16.auto_cast");
  r.get("bf16.enabled", c.bf16.enabled);
  // "auto" (false in the document): train::resolve_device chooses unless the other is enabled.
  c.fp16.automatic = autos.fp16_enabled && !c.bf16.enabled;
  c.bf16.automatic = autos.bf16_enabled && !c.fp16.enabled;

  read_optimizer(r, c.optimizer, c.notes);
  read_scheduler(r, c.scheduler, c.notes);
  read_zero(r, c.zero_optimization, c.notes);

  r.get("aio.block_size", c.aio.block_size, IntRange{4096});
  r.get("aio.queue_depth", c.aio.queue_depth, IntRange{1, 65536});
  r.get("aio.thread_count", c.aio.thread_count, IntRange{1, 1024});
  r.get("aio.single_submit", c.aio.single_submit);
  r.get("aio.overlap_events", c.aio.overlap_events);
  read_monitor(r, "tensorboard", c.tensorboard);
  read_monitor(r, "csv_monitor", c.csv_monitor);

  read_strata(r, c.strata);
  if (c.micro_batch_auto && c.train_batch_size == 0 && c.train_micro_batch_size_per_gpu == 0 &&
      !c.strata.memory.device_limit) {
    // Nothing determines it and no device cap lets the memory planner choose it (parallel/plan):
    // Hugging Face's default, as its trainer fills it from --per_device_train_batch_size when
    // that is not given.
    c.train_micro_batch_size_per_gpu = kHfMicroBatch;
    c.notes.push_back(fmt::format(
        "auto: train_micro_batch_size_per_gpu = {}, the default of Hugging Face's "
        "--per_device_train_batch_size, which fills it when not given and no other batch size "
        "determines it (another value: --set train_micro_batch_size_per_gpu=4, or a device cap, "
        "--device-memory or strata.memory.device_limit, for the memory planner to choose the "
        "largest that fits)",
        kHfMicroBatch));
  }

  check_rules(c, problems);
  check_batch_given(c, problems, autos.train_batch_size || autos.train_micro_batch_size_per_gpu);
  return c;
}

Config parse_config(const json& doc) {
  Problems problems;
  Config c = check_config(doc, problems);
  problems.raise_if_any("");
  return c;
}

}  // namespace strata::config
