#include "parallel/engine/checkpointing.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/compat.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/flat_range.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/save.hpp"
#include "framework/checkpoint/shard_writer.hpp"
#include "framework/checkpoint/staging.hpp"
#include "framework/checkpoint/verify.hpp"
#include "framework/core/convert.hpp"
#include "framework/precision/loss_scaler.hpp"
#include "parallel/engine/optimizer_checkpoint.hpp"
#include "parallel/engine/rank_agreement.hpp"

namespace strata::parallel {

namespace ck = strata::checkpoint;

namespace {

// ---- what a unit holds ----

std::vector<ck::ExpectedParam> expected_params(const nn::ParamStore& store) {
  std::vector<ck::ExpectedParam> out;
  for (const nn::Parameter* p : store.parameters())
    out.push_back({p->name, p->placement.global_shape(p->shape)});
  return out;
}

// The f32 master of unit u's owned slice: the trainer's copy for 16-bit parameters, else the
// parameters themselves.
const Tensor& master_of(const nn::ParamStore& store, const train::UnitOptimizerState& s,
                        const Tensor& value_shard) {
  return store.options().param_dtype == DType::f32 ? value_shard : s.master;
}

// A host tensor with t's contents: t itself when it is on the CPU.
Tensor on_host(const Tensor& t, std::vector<Tensor>& keep) {
  if (!t.device().is_cuda()) return t;
  keep.push_back(t.to(t.dtype(), TensorOptions{}.with(Tier::host).with(Category::other)));
  return keep.back();
}

// A unit's optimizer state and parameter slice as a checkpoint reads or writes them: in host
// memory. On the CPU the tensors themselves; on a GPU host copies of them, which copy_back()
// returns to the device after a load (the checkpoint code addresses elements on the host).
class HostMirror {
 public:
  Tensor of(const Tensor& t) {
    if (!t.defined() || !t.device().is_cuda()) return t;
    pairs_.emplace_back(t, on_host(t, keep_));
    return pairs_.back().second;
  }
  train::UnitOptimizerState of(const train::UnitOptimizerState& s) {
    train::UnitOptimizerState h;
    h.master = of(s.master);
    for (const Tensor& t : s.tensors) h.tensors.push_back(of(t));
    return h;
  }
  void copy_back() {
    for (auto& [device, host] : pairs_) Tensor(device).copy_from(host);
  }

 private:
  std::vector<Tensor> keep_;
  std::vector<std::pair<Tensor, Tensor>> pairs_;
};

// Waits for w. On the background saver's thread (polling = true) it looks at w now and then,
// sleeping in between, and leaves its progress to the communication thread instead of driving
// MPI progress itself in a spin, which would take a core from training (and, from a low-priority
// thread, hold up the progress of training's own collectives).
void wait_for(const Work& w, const Group& g, bool polling) {
  if (polling) {
    const auto deadline = std::chrono::steady_clock::now() + g.timeout();
    auto nap = std::chrono::microseconds(100);
    while (!w.is_completed() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(nap);
      nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(5));
    }
    w.wait(std::chrono::milliseconds(10));  // rethrows a failure; names late ranks on timeout
  } else {
    w.wait();
  }
}

// Collective: whether every rank passed ok = true.
bool ranks_ok(const Group& g, bool ok, bool polling) {
  return g.all_reduce_value<std::int32_t>(ok ? 0 : 1, ReduceOp::max,
                                          [&](const Work& w) { wait_for(w, g, polling); }) == 0;
}

// Collective: every rank's text on rank 0, in rank order (two all-gathers: lengths, then the
// texts padded to the longest).
std::vector<std::string> gather_texts(const Group& g, const std::string& mine, bool polling) {
  const auto n = static_cast<std::size_t>(g.size());
  auto lens = std::make_shared<std::vector<std::int64_t>>(n + 1);
  (*lens)[n] = static_cast<std::int64_t>(mine.size());
  Work w = g.all_gather(span(static_cast<const std::int64_t*>(lens->data() + n), 1),
                        span(lens->data(), n));
  w.keep_alive(lens);
  wait_for(w, g, polling);
  std::int64_t longest = 0;
  for (std::size_t r = 0; r < n; ++r) longest = std::max(longest, (*lens)[r]);
  const auto width = static_cast<std::size_t>(std::max<std::int64_t>(longest, 1));
  auto in = std::make_shared<std::vector<std::uint8_t>>(width, 0);
  std::copy(mine.begin(), mine.end(), in->begin());
  auto all = std::make_shared<std::vector<std::uint8_t>>(width * n);
  Work w2 = g.all_gather(span(static_cast<const std::uint8_t*>(in->data()), width),
                         span(all->data(), all->size()));
  w2.keep_alive(in);
  w2.keep_alive(all);
  wait_for(w2, g, polling);
  std::vector<std::string> out;
  if (g.rank() != 0) return out;
  for (std::size_t r = 0; r < n; ++r)
    out.emplace_back(reinterpret_cast<const char*>(all->data() + r * width),
                     static_cast<std::size_t>((*lens)[r]));
  return out;
}

// Slices of `kind` for [a, b) of unit l, whose owned buffer `owned` starts at flat element lo,
// named by global parameter and range: a tensor-parallel part's split parameters as one slice per
// run of their placement, its replicated ones by part 0 only (tp_index: this rank's part).
std::vector<ck::SliceRef> unit_slices(const nn::UnitLayout& l, std::int64_t a, std::int64_t b,
                                      std::string_view kind, const Tensor& owned, int tp_index) {
  if (a >= b) return {};
  const auto* base = static_cast<const unsigned char*>(owned.raw());
  const std::size_t esize = dtype_size(owned.dtype());
  std::vector<ck::SliceRef> out;
  for (const ck::FlatPiece& pc : ck::split_flat_range(flat_params(l), a, b)) {
    const nn::Parameter& p = *l.params[pc.param];
    if (!p.placement.split() && tp_index != 0) continue;
    const Shape whole = p.placement.global_shape(p.shape);
    const unsigned char* data = base + static_cast<std::size_t>(pc.flat_begin - l.lo) * esize;
    to_global_slices(p, pc.begin, pc.end,
                     [&](std::int64_t local, std::int64_t global, std::int64_t n, std::int64_t run,
                         std::int64_t stride) {
                       ck::SliceRef s{std::string(kind), p.name, whole, owned.dtype(), global,
                                      global + n,
                                      data + static_cast<std::size_t>(local - pc.begin) * esize};
                       s.run = run;
                       s.stride = stride;
                       out.push_back(std::move(s));
                     });
  }
  return out;
}

}  // namespace

std::pair<std::int64_t, std::int64_t> checkpoint_save_range(const nn::UnitLayout& l, int stage,
                                                            int dp_size, int dp_rank) {
  if (stage >= 1) return {l.lo, std::min(l.hi, l.numel)};
  const std::int64_t n = l.numel;
  return {n * dp_rank / dp_size, n * (dp_rank + 1) / dp_size};
}

namespace {
// What this rank writes of unit l's optimizer state (see StateSaveRange).
StateSaveRange state_save_range(const nn::UnitLayout& l, int stage, const Group& dp) {
  StateSaveRange r;
  std::tie(r.a, r.b) = checkpoint_save_range(l, stage, dp.size(), dp.rank());
  r.writes = true;
  r.sharded = stage >= 1;
  r.replicated = dp.rank() == 0;
  r.dp_rank = dp.rank();
  r.dp_size = dp.size();
  return r;
}
}  // namespace

// ---- construction ----

Checkpointer::Checkpointer(const Group& world, const Group& dp, nn::ParamStore& store,
                           train::Trainer& trainer, int zero_stage, CheckpointOptions options,
                           CheckpointStage stage)
    : world_(world),
      dp_(dp),
      store_(store),
      trainer_(trainer),
      stage_(zero_stage),
      opts_(std::move(options)),
      pipeline_(std::move(stage)) {
  STRATA_CHECK(world_.size() == dp_.size() * pipeline_.tp * pipeline_.pp, "checkpoint",
               "world of {} ranks but dp {} x tp {} x pp {}", world_.size(), dp_.size(),
               pipeline_.tp, pipeline_.pp);
  STRATA_CHECK(zero_stage >= 0 && zero_stage <= 3, "checkpoint", "ZeRO stage {} is not 0-3",
               zero_stage);
  agree_ = world_.split(0, world_.rank(), world_.name() + ".checkpoint");
  agree_.set_timeout(std::max(opts_.agree_timeout, world_.timeout()));
  if (opts_.async) {
    Group g = agree_;
    saver_ = std::make_unique<ck::AsyncSaver>([g](bool ok) { return ranks_ok(g, ok, true); });
    saver_->set_gather([g](const std::string& mine) { return gather_texts(g, mine, true); });
  }
}

Checkpointer::~Checkpointer() {
  if (background_error_) {
    try {
      std::rethrow_exception(background_error_);
    } catch (const std::exception& e) {
      ck::warn_to_stderr(fmt::format("background checkpoint save failed: {}", e.what()));
    }
  }
}  // saver_'s destructor waits for the save in flight

// ---- saving ----

StateSaveRange Checkpointer::save_range(std::size_t u) const {
  const auto& c = pipeline_.copies;
  if (std::find(c.begin(), c.end(), u) != c.end()) return {};  // its owner's stage saves it
  return state_save_range(store_.layout(u), stage_, dp_);
}

ck::TrainState Checkpointer::train_state(const JobState& job) const {
  ck::TrainState s;
  s.optimizer = checkpoint_optimizer_name(trainer_);
  s.optimizer_updates = trainer_.updates();
  s.scheduler_steps = trainer_.updates();  // the LR schedule is a function of the update count
  if (const precision::LossScaler* sc = trainer_.scaler()) {
    ck::LossScalerRecord r;
    r.dynamic = sc->dynamic();
    r.cur_scale = sc->scale();
    if (const auto* d = dynamic_cast<const precision::DynamicLossScaler*>(sc)) {
      const precision::LossScalerState st = d->state();
      r.cur_iter = st.cur_iter;
      r.last_overflow_iter = st.last_overflow_iter;
      r.cur_hysteresis = st.cur_hysteresis;
    }
    s.loss_scaler = r;
  }
  s.sampler = job.sampler;
  s.extra = job.extra;
  return s;
}

void Checkpointer::save(const JobState& job) {
  STRATA_CHECK(!opts_.root.empty(), "checkpoint", "no checkpoint directory configured");
  ck::SaveSpec spec;
  spec.root = opts_.root;
  spec.rank = world_.rank();
  spec.header.step = job.step;
  spec.header.config = job.config;
  spec.header.layout = ck::WorldLayout{world_.size(), dp_.size(), pipeline_.tp, pipeline_.pp};
  spec.header.zero_stage = stage_;
  spec.header.state = train_state(job);
  spec.retention = opts_.retention;
  ck::RankState rs = job.rank;
  // Self-description: which dp rank wrote the file, and the (shared) data position.
  rs.extra["dp_rank"] = dp_.rank();
  if (pipeline_.pp > 1) rs.extra["pp_stage"] = pipeline_.index;
  if (pipeline_.tp > 1) rs.extra["tp_rank"] = pipeline_.tp_index;
  if (job.sampler)
    rs.extra["sampler"] = {{"position", job.sampler->position}, {"epoch", job.sampler->epoch}};
  if (opts_.async) {
    save_async(std::move(spec), std::move(rs));
    return;
  }
  std::exception_ptr err;
  try {
    save_sync(spec, rs);
  } catch (...) {
    err = std::current_exception();
  }
  agree_or_throw(world_, err);
}

// The commit protocol of checkpoint::save_checkpoint, streamed: each unit is acquired from the
// OptimizerStateStore, written and released before the next (an NVMe store holds only a few units
// at a time), instead of handing save_checkpoint every slice at once.
void Checkpointer::save_sync(const ck::SaveSpec& spec, const ck::RankState& rs) {
  const ck::ManifestHeader& h = spec.header;
  const std::string step_dir = ck::join_path(spec.root, ck::step_dir_name(h.step));
  auto phase = [&](const char* what, auto&& f) {
    std::exception_ptr mine;
    try {
      f();
    } catch (...) {
      mine = std::current_exception();
    }
    const bool all = ranks_ok(agree_, mine == nullptr, false);
    if (mine) std::rethrow_exception(mine);
    if (!all)
      fail("checkpoint", "checkpoint of step {} not committed: another rank failed to {}", h.step,
           what);
  };
  phase("prepare the step directory", [&] {
    if (spec.rank == 0) ck::prepare_step_dir(spec.root, step_dir);
  });
  ck::ShardRecord record;
  phase("write its file", [&] {
    ck::ShardWriter writer(step_dir, spec.rank, h.layout.world, h.step);
    auto& states = trainer_.states();
    // A full disk is reported before writing.
    const SavedSize size = saved_size();
    writer.expect(size.bytes, size.slices);
    store_.expect_value_shards_in_order();
    for (std::size_t u = 0; u < store_.num_units(); ++u) {
      const nn::UnitLayout& l = store_.layout(u);
      const StateSaveRange r = save_range(u);
      train::UnitOptimizerState& s = states.acquire(u);
      try {
        HostMirror host;
        const nn::ValueShardScope vshard(store_, u, false);
        const train::UnitOptimizerState hs = host.of(s);
        for (const auto& sl : unit_slices(l, r.a, r.b, ck::kParam,
                                          host.of(master_of(store_, hs, vshard.get())),
                                          pipeline_.tp_index))
          writer.add(sl);
        for_each_state_slice(trainer_, l, u, r, hs, pipeline_.tp_index,
                             [&](const ck::SliceRef& sl) { writer.add(sl); });
      } catch (...) {
        states.release(u, false);
        throw;
      }
      states.release(u, false);
    }
    writer.set_rank_state(rs);
    record = writer.commit();
  });
  // Rank 0 builds the manifest from what each rank reports it wrote.
  auto records = ck::parse_records(gather_texts(agree_, ck::record_to_json(record).dump(), false));
  if (spec.rank == 0) {
    ck::commit_checkpoint(spec.root, h, std::move(records));
    ck::apply_retention(spec.root, spec.retention);
  }
}

// Bytes of f32 state this rank writes: the masters and `moments` optimizer buffers of its range.
Checkpointer::SavedSize Checkpointer::saved_size() const {
  SavedSize out;
  for (std::size_t u = 0; u < store_.num_units(); ++u) {
    const nn::UnitLayout& l = store_.layout(u);
    const StateSaveRange r = save_range(u);
    // The f32 masters: one slice per parameter piece (per run of a tensor-parallel part's).
    if (r.a < r.b)
      for (const ck::FlatPiece& pc : ck::split_flat_range(flat_params(l), r.a, r.b)) {
        const nn::Parameter& p = *l.params[pc.param];
        if (!p.placement.split() && pipeline_.tp_index != 0) continue;
        to_global_slices(p, pc.begin, pc.end,
                         [&](std::int64_t, std::int64_t, std::int64_t n, std::int64_t, std::int64_t) {
                           out.bytes += static_cast<std::size_t>(n) * sizeof(float);
                           ++out.slices;
                         });
      }
    out.bytes += state_slice_bytes(trainer_, l, u, r, pipeline_.tp_index, &out.slices);
  }
  return out;
}

void Checkpointer::save_async(ck::SaveSpec spec, ck::RankState rs) {
  wait();  // the previous save: its staging memory goes before this one's is taken
  auto& states = trainer_.states();
  // One arena for every slice, in the order the writer adds them (unit by unit: param, then the
  // optimizer state), which is the order of their bytes in the rank file. A slice that cannot
  // start where the previous one ends (an f32 slice after u8 codes) gets a buffer of its own.
  ck::StagingArena arena(saved_size().bytes);
  ck::SaveJob job{std::move(spec), {}, std::move(rs)};
  store_.expect_value_shards_in_order();
  for (std::size_t u = 0; u < store_.num_units(); ++u) {
    const nn::UnitLayout& l = store_.layout(u);
    const StateSaveRange r = save_range(u);
    train::UnitOptimizerState& s = states.acquire(u);
    try {
      HostMirror host;
      const nn::ValueShardScope held(store_, u, false);
      const train::UnitOptimizerState hs = host.of(s);
      for (const auto& sl : unit_slices(l, r.a, r.b, ck::kParam,
                                        host.of(master_of(store_, hs, held.get())),
                                        pipeline_.tp_index))
        job.slices.push_back(arena.stage(sl));
      for_each_state_slice(trainer_, l, u, r, hs, pipeline_.tp_index,
                           [&](const ck::SliceRef& sl) { job.slices.push_back(arena.stage(sl)); });
    } catch (...) {
      states.release(u, false);
      throw;
    }
    states.release(u, false);
  }
  saver_->submit(std::move(job));
}

bool Checkpointer::background_failed() {
  if (!saver_) return false;
  if (!background_error_ && !saver_->in_flight()) {
    try {
      saver_->poll();
    } catch (...) {
      background_error_ = std::current_exception();
    }
  }
  return background_error_ != nullptr;
}

bool Checkpointer::in_flight() const {
  return saver_ && saver_->in_flight();
}

void Checkpointer::wait() {
  if (background_error_) std::rethrow_exception(std::exchange(background_error_, nullptr));
  if (saver_) saver_->wait();
}

void Checkpointer::finish() {
  std::exception_ptr err;
  try {
    wait();
  } catch (...) {
    err = std::current_exception();
  }
  agree_or_throw(world_, err);
}

// ---- loading ----

// Stages 1-2 keep full parameter buffers, but a load fills only the owned slice: the rest is
// all-gathered over dp, as the engine does after each step — unit by unit as soon as a unit is
// loaded, so the gathers overlap the reads of the next units. Every rank posts one all-gather
// per unit, in unit order, also when its load failed part-way (the values are then undefined),
// so that the collectives stay matched; load() then agrees on the failure. Stage 0 loads
// everything; stage 3 gathers on use.
void Checkpointer::load_local(const std::string& step_dir, bool weights_only,
                              LoadedCheckpoint& out) {
  std::vector<Work> works;
  std::size_t posted = 0;
  auto post_through = [&](std::size_t n) {
    for (; posted < n; ++posted) {
      if (stage_ != 1 && stage_ != 2) continue;
      Tensor mine = store_.value_shard(posted).clone(store_.options().memory.with(Category::comm));
      works.push_back(dp_.all_gather(mine, store_.values(posted)));  // keeps `mine` alive
    }
  };
  try {
    ck::CheckpointReader reader(step_dir);
    const ck::Manifest& m = reader.manifest();
    ck::check_compatible(
        m, pipeline_.model.empty() ? expected_params(store_) : pipeline_.model, step_dir);
    const bool with_moments = !weights_only && !m.state.optimizer.empty();
    if (with_moments) check_state_compatible(reader, store_, trainer_);
    if (stage_ == 3)
      for (std::size_t u = 0; u < store_.num_units(); ++u)
        STRATA_CHECK(!store_.values_bound(u), "checkpoint",
                     "unit {} is gathered: load checkpoints before the first ZeRO-3 step", u);

    auto& states = trainer_.states();
    const DType pd = store_.options().param_dtype;
    store_.expect_value_shards_in_order();
    for (std::size_t u = 0; u < store_.num_units(); ++u) {
      const nn::UnitLayout& l = store_.layout(u);
      // (A rank may own padding only: AdamW8bit pads each unit to whole blocks per rank.)
      const auto pieces = ck::split_flat_range(flat_params(l), l.lo,
                                               std::max(l.lo, std::min(l.hi, l.numel)));
      train::UnitOptimizerState& s = states.acquire(u);
      try {
        const nn::ValueShardScope held(store_, u, true);
        HostMirror host;  // a GPU's state is read into host copies, then copied back
        const Tensor vshard = host.of(held.get());
        train::UnitOptimizerState hs = host.of(s);
        auto read = [&](std::string_view kind, const Tensor& dst) {
          for (const ck::FlatPiece& p : pieces) {
            const nn::Parameter& prm = *l.params[p.param];
            float* at = static_cast<float*>(dst.raw()) + (p.flat_begin - l.lo);
            // A tensor-parallel part reads its runs of the whole parameter.
            to_global(prm, p.begin, p.end, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
              reader.read_range(kind, prm.name, global, global + n, at + (local - p.begin), DType::f32);
            });
          }
        };
        read(ck::kParam, master_of(store_, hs, vshard));
        if (pd != DType::f32) {
          // 16-bit parameters: rounded from the masters exactly as the optimizer step writes them.
          for (const ck::FlatPiece& p : pieces) {
            const std::int64_t off = p.flat_begin - l.lo;
            convert(hs.master.data<float>() + off, DType::f32,
                    static_cast<unsigned char*>(vshard.raw()) + off * dtype_size(pd), pd,
                    static_cast<std::size_t>(p.end - p.begin));
          }
        }
        read_state(reader, trainer_, l, u, hs, with_moments, dp_.rank(), dp_.size());
        host.copy_back();
      } catch (...) {
        states.release(u, true);
        throw;
      }
      states.release(u, true);
      post_through(u + 1);
    }
    out.step_dir = step_dir;
    out.step = m.step;
    out.saved_layout = m.layout;
    out.saved_zero_stage = m.zero_stage;
    out.state = m.state;
    out.config = m.config;
    if (world_.rank() < m.layout.world) out.rank = reader.rank_state(world_.rank());
  } catch (...) {
    post_through(store_.num_units());
    wait_all(works);
    throw;
  }
  post_through(store_.num_units());
  wait_all(works);
}

void Checkpointer::apply_shared_state(const LoadedCheckpoint& loaded) {
  const ck::TrainState& st = loaded.state;
  trainer_.set_updates(st.optimizer.empty() ? 0 : st.optimizer_updates);
  auto* dyn = dynamic_cast<precision::DynamicLossScaler*>(trainer_.scaler());
  if (dyn && st.loss_scaler && st.loss_scaler->dynamic) {
    precision::LossScalerState s;
    s.cur_scale = st.loss_scaler->cur_scale;
    s.cur_iter = st.loss_scaler->cur_iter;
    s.last_overflow_iter = st.loss_scaler->last_overflow_iter;
    s.cur_hysteresis = st.loss_scaler->cur_hysteresis;
    dyn->set_state(s);
  }
}

LoadedCheckpoint Checkpointer::load(const std::string& step_dir, bool weights_only) {
  LoadedCheckpoint out;
  std::exception_ptr err;
  try {
    load_local(step_dir, weights_only, out);
  } catch (...) {
    err = std::current_exception();
  }
  agree_or_throw(world_, err);
  if (!weights_only) apply_shared_state(out);
  return out;
}

std::optional<LoadedCheckpoint> Checkpointer::resume(const std::string& spec,
                                                     const ck::WarningSink& warn) {
  const bool lead = world_.rank() == 0;
  auto warn0 = [&](const std::string& m) {
    if (lead && warn) warn(m);
  };
  if (spec == "none") return std::nullopt;
  if (spec != "auto") {
    const std::string dir = on_rank0(world_, [&] { return ck::resolve_checkpoint_dir(spec); });
    return load(dir);
  }
  if (opts_.root.empty()) return std::nullopt;
  // Newest complete checkpoint first; one that fails to load is skipped for the next older.
  std::optional<std::int64_t> below;
  std::vector<std::string> skipped;
  for (;;) {
    const std::string dir = on_rank0(world_, [&]() -> std::string {
      if (!below) {
        ck::FindOptions fo;
        fo.warn = warn0;
        const auto found = ck::find_latest(opts_.root, fo);
        return found ? found->dir : std::string();
      }
      const auto all = ck::list_complete_checkpoints(opts_.root);
      for (auto it = all.rbegin(); it != all.rend(); ++it) {
        if (it->step >= *below) continue;
        const ck::VerifyReport r = ck::verify_checkpoint(it->dir, ck::VerifyLevel::structure);
        if (r.ok()) return it->dir;
        skipped.push_back(fmt::format("{}: {}", it->dir, r.faults.front()));
        warn0(fmt::format("[checkpoint] not usable, falling back to an older checkpoint: {}",
                          skipped.back()));
      }
      std::string all_faults;
      for (const auto& s : skipped) all_faults += "\n  " + s;
      throw ck::CheckpointError(
          "", "", fmt::format("no usable checkpoint in '{}':{}", opts_.root, all_faults));
    });
    if (dir.empty()) return std::nullopt;
    try {
      return load(dir);
    } catch (const ck::CheckpointError& e) {
      skipped.push_back(e.what());
      warn0(
          fmt::format("[checkpoint] {} could not be loaded, falling back to an older "
                      "checkpoint: {}",
                      dir, e.what()));
      below = ck::parse_step_dir_name(std::filesystem::path(dir).filename().string()).value_or(0);
    }
  }
}

}  // namespace strata::parallel
