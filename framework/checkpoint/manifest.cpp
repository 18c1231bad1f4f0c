#include "framework/checkpoint/manifest.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/fault_point.hpp"
#include "framework/checkpoint/json_fields.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/slice.hpp"
#include "framework/core/json_limits.hpp"

#ifndef STRATA_CHECKPOINT_VERSION
#define STRATA_CHECKPOINT_VERSION "unknown"
#endif

namespace strata::checkpoint {

const char* strata_version() {
  return STRATA_CHECKPOINT_VERSION;
}

std::vector<std::string> ParamEntry::kinds() const {
  std::set<std::string> k;
  for (const auto& s : slices) k.insert(s.kind);
  return {k.begin(), k.end()};
}

const ParamEntry* Manifest::find(const std::string& name) const {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

std::uint64_t Manifest::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& f : files) n += f.bytes;
  return n;
}

namespace {

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

DType strict_dtype(const std::string& s, const std::string& where) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8, DType::u8, DType::i16,
                  DType::u16, DType::i32, DType::u32, DType::i64})
    if (dtype_name(t) == s) return t;
  fail("checkpoint", "{}: '{}' is not a dtype name", where, s);
}

// The gaps of [0, numel) not covered by the intervals, as text ("[0, 4) [10, 12)"), empty if none.
std::string coverage_gaps(std::vector<std::pair<std::int64_t, std::int64_t>> iv,
                          std::int64_t numel) {
  std::sort(iv.begin(), iv.end());
  std::string gaps;
  std::int64_t pos = 0;
  for (const auto& [b, e] : iv) {
    if (b > pos) gaps += fmt::format("{}[{}, {})", gaps.empty() ? "" : " ", pos, b);
    pos = std::max(pos, e);
  }
  if (pos < numel) gaps += fmt::format("{}[{}, {})", gaps.empty() ? "" : " ", pos, numel);
  return gaps;
}

void check_format_version(int v) {
  if (v < kOldestManifestFormatVersion || v > kManifestFormatVersion)
    fail("checkpoint", "format_version {} is not supported (this build reads {} to {})", v,
         kOldestManifestFormatVersion, kManifestFormatVersion);
}

void validate(const Manifest& m) {
  check_format_version(m.format_version);
  if (m.step < 0) fail("checkpoint", "step {} is negative", m.step);
  const WorldLayout& l = m.layout;
  if (l.dp < 1 || l.tp < 1 || l.pp < 1 || static_cast<std::int64_t>(l.dp) * l.tp * l.pp != l.world)
    fail("checkpoint", "layout: world {} is not dp {} x tp {} x pp {}", l.world, l.dp, l.tp, l.pp);
  if (m.zero_stage < 0 || m.zero_stage > 3)
    fail("checkpoint", "zero_stage {} is not 0..3", m.zero_stage);
  if (m.files.size() != static_cast<std::size_t>(l.world))
    fail("checkpoint", "{} rank files listed for a world of {}", m.files.size(), l.world);
  std::set<std::string> files;
  for (std::size_t r = 0; r < m.files.size(); ++r) {
    const FileEntry& f = m.files[r];
    if (f.rank != static_cast<int>(r) || f.name != rank_file_name(static_cast<int>(r)))
      fail("checkpoint", "files[{}] is '{}' for rank {}; expected '{}'", r, f.name, f.rank,
           rank_file_name(static_cast<int>(r)));
    files.insert(f.name);
  }
  std::set<std::string> names;
  std::set<std::pair<std::string, std::string>> datasets;
  for (const ParamEntry& p : m.params) {
    if (!valid_param_name(p.name)) fail("checkpoint", "invalid parameter name '{}'", p.name);
    if (!names.insert(p.name).second) fail("checkpoint", "parameter {} is listed twice", p.name);
    for (auto e : p.shape.dims())
      if (e < 0) fail("checkpoint", "{}: negative extent in shape {}", p.name, p.shape.str());
    const std::int64_t numel = p.numel();
    std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> by_kind;
    std::map<std::string, DType> kind_dtype;
    for (const SliceEntry& s : p.slices) {
      if (!valid_kind(s.kind)) fail("checkpoint", "{}: invalid kind '{}'", p.name, s.kind);
      if (!files.count(s.file))
        fail("checkpoint", "{} {}: file '{}' is not a rank file of this checkpoint", s.kind, p.name,
             s.file);
      if (const std::string e = s.layout().error(numel); !e.empty())
        fail("checkpoint", "{} {}: {}", s.kind, p.name, e);
      if (s.run > 0 && m.format_version < 3)
        fail("checkpoint", "{} {}: a hyperslab slice in a format_version {} manifest (hyperslabs "
             "came with 3)", s.kind, p.name, m.format_version);
      if (!datasets.insert({s.file, s.dataset}).second)
        fail("checkpoint", "{} {}: dataset {} of {} is listed twice", s.kind, p.name, s.dataset,
             s.file);
      auto [it, fresh] = kind_dtype.emplace(s.kind, s.dtype);
      if (!fresh && it->second != s.dtype)
        fail("checkpoint", "{} {}: slices are stored as both {} and {}", s.kind, p.name,
             dtype_name(it->second), dtype_name(s.dtype));
      s.layout().for_each_run([&](std::int64_t b, std::int64_t n) {
        by_kind[s.kind].push_back({b, b + n});
      });
    }
    auto pk = kind_dtype.find(std::string(kParam));
    if (is_state_entry(p.name)) {
      // Optimizer state of its own shape ("owner#what"): no parameter values.
      if (pk != kind_dtype.end())
        fail("checkpoint", "{}: '{}' slices on an optimizer-state entry ('{}' is reserved)",
             p.name, kParam, kStateEntrySeparator);
    } else {
      if (pk == kind_dtype.end()) fail("checkpoint", "{}: no '{}' slices", p.name, kParam);
      if (pk->second != p.dtype)
        fail("checkpoint", "{}: dtype {} but its param slices are {}", p.name,
             dtype_name(p.dtype), dtype_name(pk->second));
    }
    for (auto& [kind, iv] : by_kind) {
      const std::string gaps = coverage_gaps(iv, numel);
      if (!gaps.empty())
        fail("checkpoint", "{} {}: no rank file holds elements {} of {}", kind, p.name, gaps,
             numel);
    }
  }
}

json layout_json(const WorldLayout& l) {
  return {{"world", l.world}, {"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}};
}

int small_int(JsonFields& f, const std::string& key) {
  const std::int64_t v = f.i64(key);
  if (v < INT32_MIN || v > INT32_MAX)
    fail("checkpoint", "{}.{} = {} is out of range", f.where(), key, v);
  return static_cast<int>(v);
}

std::uint32_t checksum_field(JsonFields& f, const std::string& key) {
  const std::string s = f.string(key);
  const auto c = parse_checksum(s);
  if (!c) fail("checkpoint", "{}.{} = '{}' is not crc32:XXXXXXXX", f.where(), key, s);
  return *c;
}

json hdf5_bytes_json(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& extents,
                     std::uint32_t checksum) {
  json e = json::array();
  for (const auto& [off, len] : extents) e.push_back({off, len});
  return {{"extents", e}, {"checksum", format_checksum(checksum)}};
}

// Reads {"extents": [[offset, length], ...], "checksum": "crc32:..."} strictly; returns the
// checksum.
std::uint32_t hdf5_bytes_from_json(const json& j, const std::string& where,
                                   std::vector<std::pair<std::uint64_t, std::uint64_t>>& out) {
  JsonFields f(j, where);
  const json& e = f.need("extents");
  if (!e.is_array() || e.size() > (1u << 16))
    fail("checkpoint", "{}.extents is not a list of [offset, length]", where);
  std::uint64_t end = 0;
  for (const auto& x : e) {
    if (!x.is_array() || x.size() != 2 || !x[0].is_number_unsigned() || !x[1].is_number_unsigned())
      fail("checkpoint", "{}.extents has an entry that is not [offset, length]", where);
    const auto off = x[0].get<std::uint64_t>(), len = x[1].get<std::uint64_t>();
    if (off < end || len > UINT64_MAX - off)
      fail("checkpoint", "{}.extents are not ascending and disjoint", where);
    end = off + len;
    out.push_back({off, len});
  }
  const std::uint32_t c = checksum_field(f, "checksum");
  f.done();
  return c;
}

}  // namespace

Manifest build_manifest(const ManifestHeader& h, const std::vector<ShardRecord>& records) {
  Manifest m;
  m.strata_version = strata_version();
  m.created = utc_now();
  m.step = h.step;
  m.config = h.config;
  m.layout = h.layout;
  m.zero_stage = h.zero_stage;
  m.state = h.state;
  std::vector<const ShardRecord*> by_rank(static_cast<std::size_t>(std::max(h.layout.world, 0)),
                                          nullptr);
  for (const ShardRecord& r : records) {
    if (r.rank < 0 || r.rank >= h.layout.world)
      fail("checkpoint", "record of rank {} outside the world of {}", r.rank, h.layout.world);
    if (by_rank[r.rank]) fail("checkpoint", "two records for rank {}", r.rank);
    by_rank[r.rank] = &r;
  }
  for (std::size_t rank = 0; rank < by_rank.size(); ++rank)
    if (!by_rank[rank]) fail("checkpoint", "no file from rank {} (of {})", rank, h.layout.world);
  // Parameters in the order the files list their values (rank 0 first), then any that only have
  // other kinds (optimizer-state entries; validate() rejects any other).
  std::map<std::string, std::size_t> index;
  bool strided = false;
  for (int pass = 0; pass < 2; ++pass) {
    for (const ShardRecord* r : by_rank) {
      if (pass == 0)
        m.files.push_back(FileEntry{r->file, r->rank, r->bytes, r->state_checksum, r->hdf5_extents,
                                    r->hdf5_checksum});
      for (const DatasetRecord& d : r->datasets) {
        if ((pass == 0) != (d.kind == kParam)) continue;
        auto [it, fresh] = index.emplace(d.name, m.params.size());
        if (fresh) m.params.push_back(ParamEntry{d.name, d.global_shape, d.dtype, {}});
        ParamEntry& p = m.params[it->second];
        if (p.shape != d.global_shape)
          fail("checkpoint", "{}: {} says shape {}, another file says {}", d.name, r->file,
               d.global_shape.str(), p.shape.str());
        p.slices.push_back(SliceEntry{r->file, d.path, d.kind, d.dtype, d.begin, d.end,
                                      d.checksum, d.run, d.stride});
        if (d.run > 0) strided = true;
      }
    }
  }
  for (ParamEntry& p : m.params)
    std::stable_sort(p.slices.begin(), p.slices.end(),
                     [](const SliceEntry& a, const SliceEntry& b) {
                       return std::tie(a.kind, a.begin) < std::tie(b.kind, b.begin);
                     });
  m.format_version = strided ? kManifestFormatVersion : kFlatManifestFormatVersion;
  validate(m);
  return m;
}

json to_json(const Manifest& m) {
  json files = json::array();
  for (const auto& f : m.files) {
    files.push_back({{"name", f.name},
                     {"rank", f.rank},
                     {"bytes", f.bytes},
                     {"state_checksum", format_checksum(f.state_checksum)}});
    if (f.hdf5_checksum)
      files.back()["hdf5_bytes"] = hdf5_bytes_json(f.hdf5_extents, *f.hdf5_checksum);
  }
  json params = json::array();
  for (const auto& p : m.params) {
    json slices = json::array();
    for (const auto& s : p.slices)
      slices.push_back({{"kind", s.kind},
                        {"file", s.file},
                        {"dataset", s.dataset},
                        {"dtype", std::string(dtype_name(s.dtype))},
                        {"begin", s.begin},
                        {"end", s.end},
                        {"checksum", format_checksum(s.checksum)}});
    for (std::size_t k = 0; k < p.slices.size(); ++k)
      if (p.slices[k].run > 0) {
        slices[k]["run"] = p.slices[k].run;
        slices[k]["stride"] = p.slices[k].stride;
      }
    params.push_back({{"name", p.name},
                      {"shape", p.shape.dims()},
                      {"dtype", std::string(dtype_name(p.dtype))},
                      {"slices", slices}});
  }
  return {{"format", kManifestFormat},
          {"format_version", m.format_version},
          {"strata_version", m.strata_version},
          {"created", m.created},
          {"step", m.step},
          {"layout", layout_json(m.layout)},
          {"zero_stage", m.zero_stage},
          {"state", to_json(m.state)},
          {"config", m.config},
          {"files", files},
          {"params", params}};
}

json record_to_json(const ShardRecord& r) {
  json datasets = json::array();
  for (const DatasetRecord& d : r.datasets)
    datasets.push_back({{"path", d.path},
                        {"kind", d.kind},
                        {"name", d.name},
                        {"shape", d.global_shape.dims()},
                        {"dtype", std::string(dtype_name(d.dtype))},
                        {"begin", d.begin},
                        {"end", d.end},
                        {"checksum", format_checksum(d.checksum)}});
  for (std::size_t k = 0; k < r.datasets.size(); ++k)
    if (r.datasets[k].run > 0) {
      datasets[k]["run"] = r.datasets[k].run;
      datasets[k]["stride"] = r.datasets[k].stride;
    }
  json out = {{"file", r.file},
              {"rank", r.rank},
              {"bytes", r.bytes},
              {"state_checksum", format_checksum(r.state_checksum)},
              {"datasets", datasets}};
  if (r.hdf5_checksum) out["hdf5_bytes"] = hdf5_bytes_json(r.hdf5_extents, *r.hdf5_checksum);
  return out;
}

ShardRecord record_from_json(const json& j) {
  JsonFields f(j, "shard record");
  ShardRecord r;
  r.file = f.string("file");
  r.rank = small_int(f, "rank");
  r.bytes = f.u64("bytes");
  r.state_checksum = checksum_field(f, "state_checksum");
  if (const json* h = f.maybe("hdf5_bytes"))
    r.hdf5_checksum = hdf5_bytes_from_json(*h, "shard record.hdf5_bytes", r.hdf5_extents);
  const json& datasets = f.need("datasets");
  if (!datasets.is_array()) fail("checkpoint", "shard record datasets is not an array");
  for (std::size_t i = 0; i < datasets.size(); ++i) {
    JsonFields e(datasets[i], fmt::format("datasets[{}]", i));
    DatasetRecord d;
    d.path = e.string("path");
    d.kind = e.string("kind");
    d.name = e.string("name");
    const json& shape = e.need("shape");
    if (!shape.is_array() || shape.size() > 32)
      fail("checkpoint", "datasets[{}].shape is not a list of extents", i);
    std::vector<std::int64_t> dims;
    for (const auto& x : shape) {
      if (!x.is_number_integer()) fail("checkpoint", "datasets[{}].shape has a non-integer", i);
      dims.push_back(x.get<std::int64_t>());
    }
    d.global_shape = Shape(dims);
    d.dtype = strict_dtype(e.string("dtype"), e.where() + ".dtype");
    d.begin = e.i64("begin");
    d.end = e.i64("end");
    d.checksum = checksum_field(e, "checksum");
    if (e.maybe("run")) {
      d.run = e.i64("run");
      d.stride = e.i64("stride");
    }
    e.done();
    r.datasets.push_back(std::move(d));
  }
  f.done();
  return r;
}

Manifest manifest_from_json(const json& j) {
  JsonFields f(j, "manifest");
  const std::string format = f.string("format");
  if (format != kManifestFormat)
    fail("checkpoint", "format is '{}', expected '{}'", format, kManifestFormat);
  Manifest m;
  m.format_version = small_int(f, "format_version");
  check_format_version(m.format_version);
  m.strata_version = f.string("strata_version");
  m.created = f.string("created");
  m.step = f.i64("step");
  {
    JsonFields l(f.need("layout"), "layout");
    m.layout = WorldLayout{small_int(l, "world"), small_int(l, "dp"), small_int(l, "tp"),
                           small_int(l, "pp")};
    l.done();
  }
  m.zero_stage = small_int(f, "zero_stage");
  m.state = train_state_from_json(f.need("state"));
  m.config = f.need("config");
  const json& files = f.need("files");
  if (!files.is_array()) fail("checkpoint", "manifest.files is not an array");
  for (std::size_t i = 0; i < files.size(); ++i) {
    JsonFields e(files[i], fmt::format("files[{}]", i));
    FileEntry fe;
    fe.name = e.string("name");
    fe.rank = small_int(e, "rank");
    fe.bytes = e.u64("bytes");
    fe.state_checksum = checksum_field(e, "state_checksum");
    if (const json* h = e.maybe("hdf5_bytes"))
      fe.hdf5_checksum = hdf5_bytes_from_json(*h, e.where() + ".hdf5_bytes", fe.hdf5_extents);
    e.done();
    m.files.push_back(std::move(fe));
  }
  const json& params = f.need("params");
  if (!params.is_array()) fail("checkpoint", "manifest.params is not an array");
  for (std::size_t i = 0; i < params.size(); ++i) {
    JsonFields e(params[i], fmt::format("params[{}]", i));
    ParamEntry p;
    p.name = e.string("name");
    const json& shape = e.need("shape");
    if (!shape.is_array() || shape.size() > 32)
      fail("checkpoint", "params[{}].shape is not a list of extents", i);
    std::vector<std::int64_t> dims;
    for (const auto& d : shape) {
      if (!d.is_number_integer())
        fail("checkpoint", "params[{}].shape has a non-integer extent", i);
      dims.push_back(d.get<std::int64_t>());
    }
    p.shape = Shape(dims);
    p.dtype = strict_dtype(e.string("dtype"), e.where() + ".dtype");
    const json& slices = e.need("slices");
    if (!slices.is_array()) fail("checkpoint", "params[{}].slices is not an array", i);
    for (std::size_t k = 0; k < slices.size(); ++k) {
      JsonFields s(slices[k], fmt::format("params[{}].slices[{}]", i, k));
      SliceEntry se;
      se.kind = s.string("kind");
      se.file = s.string("file");
      se.dataset = s.string("dataset");
      se.dtype = strict_dtype(s.string("dtype"), s.where() + ".dtype");
      se.begin = s.i64("begin");
      se.end = s.i64("end");
      se.checksum = checksum_field(s, "checksum");
      if (s.maybe("run")) {
        se.run = s.i64("run");
        se.stride = s.i64("stride");
      }
      s.done();
      p.slices.push_back(std::move(se));
    }
    e.done();
    m.params.push_back(std::move(p));
  }
  f.done();
  validate(m);
  return m;
}

std::uint32_t manifest_checksum(const json& without_checksum) {
  const std::string text = without_checksum.dump();
  return crc32(text.data(), text.size());
}

void write_manifest_atomic(const std::string& step_dir, const Manifest& m) {
  validate(m);
  json j = to_json(m);
  j["checksum"] = format_checksum(manifest_checksum(j));
  write_file_atomic(join_path(step_dir, kManifestName), j.dump(1) + "\n",
                    [&] { fault_point("manifest_tmp", m.step, 0); });
}

Manifest read_manifest(const std::string& step_dir) {
  const std::string path = join_path(step_dir, kManifestName);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    corrupt(path, "", "no manifest: '{}' is not a complete checkpoint", step_dir);
  try {
    const std::string text = read_text_file(path);
    check_json_limits(text, "manifest", "checkpoint", JsonLimits{.max_depth = 80});
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      std::string why = e.what();
      for (char& c : why)  // the parser quotes the damaged bytes
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
      fail("checkpoint", "not valid JSON ({} bytes): {}", text.size(), why);
    }
    std::optional<std::uint32_t> stored;
    if (j.is_object() && j.contains("checksum")) {
      JsonFields f(j, "manifest");
      stored = checksum_field(f, "checksum");
      j.erase("checksum");
    }
    Manifest m = manifest_from_json(j);  // the structure first: its errors are more specific
    if (!stored && m.format_version >= 2)
      fail("checkpoint", "no checksum (format_version {} manifests have one)", m.format_version);
    if (stored) {
      const std::uint32_t actual = manifest_checksum(j);
      if (actual != *stored)
        fail("checkpoint",
             "checksum mismatch: the manifest says {}, its contents give {} (changed after it "
             "was written: restore it, or resume from another checkpoint)",
             format_checksum(*stored), format_checksum(actual));
    }
    return m;
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.rfind("[checkpoint] ", 0) == 0) what.erase(0, 13);
    throw CheckpointError(path, "", what);
  }
}

}  // namespace strata::checkpoint
