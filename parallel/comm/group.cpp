#include "parallel/comm/group.hpp"

#include <algorithm>
#include <numeric>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/core/error.hpp"
#include "parallel/comm/device_support.hpp"
#include "parallel/comm/group_state.hpp"
#include "parallel/comm/transports.hpp"
#include "parallel/comm/overlap.hpp"

namespace strata::parallel {

namespace {

std::string list_ranks(const std::vector<int>& r) {
  if (r.size() <= 16) return fmt::format("[{}]", fmt::join(r, ", "));
  std::vector<int> head(r.begin(), r.begin() + 8), tail(r.end() - 4, r.end());
  return fmt::format("[{}, ..., {}]", fmt::join(head, ", "), fmt::join(tail, ", "));
}

Span span_of(const Tensor& t, const char* what) {
  STRATA_CHECK(t.defined(), "comm", "{}: the tensor is undefined", what);
  STRATA_CHECK(t.is_contiguous(), "comm",
               "{}: the tensor {} is not contiguous (make it contiguous first; communication "
               "never makes a hidden copy)",
               what, t.shape().str());
  return Span{t.raw(), static_cast<std::size_t>(t.numel()), t.dtype(), t.device(), t.tier()};
}


void check_pair(const char* what, ConstSpan in, Span out) {
  STRATA_CHECK(in.dtype == out.dtype, "comm", "{}: input is {} but output is {}", what,
               dtype_name(in.dtype), dtype_name(out.dtype));
  STRATA_CHECK(in.device == out.device, "comm", "{}: input is on {} but output on {}", what,
               in.device.str(), out.device.str());
}

}  // namespace

std::string GroupInfo::describe() const {
  return fmt::format("group '{}' (size {}, world ranks {})", name, world_ranks.size(),
                     list_ranks(world_ranks));
}

std::string GroupInfo::rank_name(int r) const {
  if (r >= 0 && static_cast<std::size_t>(r) < world_ranks.size() &&
      world_ranks[static_cast<std::size_t>(r)] != r)
    return fmt::format("rank {} (world rank {})", r, world_ranks[static_cast<std::size_t>(r)]);
  return fmt::format("rank {}", r);
}

Group::Group(std::shared_ptr<GroupState> s) : s_(std::move(s)) {}

GroupState& Group::state() const {
  if (!s_) fail("comm", "this Group is empty: get one from init_world() (or split() of one)");
  return *s_;
}

int Group::rank() const {
  return state().host->rank();
}
int Group::size() const {
  return state().host->size();
}
const std::string& Group::name() const {
  return state().info.name;
}
const std::vector<int>& Group::world_ranks() const {
  return state().info.world_ranks;
}
std::string Group::describe() const {
  return state().desc;
}
std::string_view Group::transport() const {
  return state().host->transport();
}

std::string Group::device_transport() const {
  GroupState& st = state();
  if (st.device_via_host) return std::string(st.host->transport());
  std::lock_guard lk(st.device_mu);
  return st.device ? std::string(st.device->transport()) : std::string();
}

std::chrono::milliseconds Group::timeout() const {
  return std::chrono::milliseconds(state().timeout_ms.load());
}
void Group::set_timeout(std::chrono::milliseconds t) const {
  if (t.count() <= 0)
    user_fail("comm", "a communication timeout must be positive, got {} ms", t.count());
  state().timeout_ms.store(t.count());
}
bool Group::validate() const {
  return state().validate.load();
}
void Group::set_validate(bool on) const {
  state().validate.store(on);
}
std::uint64_t Group::sequence() const {
  return state().tracker->collectives_posted();
}

namespace {

// What each rank tells the others about itself when a group's device transport is made.
struct DeviceRecord {
  std::uint8_t has_identity = 0;  // this rank could read its GPU's UUID
  std::uint8_t nccl = 0;          // NCCL is compiled in and usable here
  std::uint8_t pad[2] = {};
  std::int32_t device = -1;  // the rank's GPU index
  std::uint8_t uuid[16] = {};
};
static_assert(sizeof(DeviceRecord) == 24, "DeviceRecord is exchanged as raw bytes");

}  // namespace

// The transport of device buffers, made by the group's first call on them (every rank of the group
// makes that call, so the exchange below is matched on every rank, as NCCL's bootstrap was):
//   - one rank: the local copies, ordered on the current stream (no NCCL);
//   - every rank has a GPU of its own, and NCCL: NCCL;
//   - otherwise (two ranks on one GPU, which NCCL refuses, or no NCCL): the host transport through
//     staging buffers in pinned host memory (staged::init), slower, for tests and small machines.
// Every rank decides from the same exchanged records, so all take the same transport.
std::shared_ptr<CommImpl> Group::make_device_transport(OpKind kind, Device dev) const {
  GroupState& st = state();
  if (size() == 1 && cuda::device_count() > 0) return local::init(st.tracker);
  // This rank first: without a GPU to identify (no CUDA, no visible GPU) nothing is posted.
  const device_support::DeviceIdentity id = device_support::identify(dev.index);
  if (!id.valid || cuda::device_count() == 0)
    user_fail("comm",
              "{} on {} buffers of {}: device buffers need the NCCL transport (or a GPU to stage "
              "them through host memory), but {}",
              op_kind_name(kind), dev.str(), st.desc,
              nccl::is_available() ? fmt::format("{} cannot be identified", dev.str())
                                   : nccl::unavailable_reason());
  DeviceRecord mine;
  mine.has_identity = 1;
  std::copy(id.uuid.begin(), id.uuid.end(), mine.uuid);
  mine.nccl = nccl::is_available() ? 1 : 0;
  mine.device = dev.index;
  const std::size_t n = static_cast<std::size_t>(size());
  std::vector<DeviceRecord> all(n);
  all_gather(ConstSpan(&mine, sizeof mine, DType::u8, Device::cpu(), Tier::host),
             Span{all.data(), n * sizeof(DeviceRecord), DType::u8, Device::cpu(), Tier::host})
      .wait();
  bool all_nccl = true;
  for (const DeviceRecord& r : all) all_nccl = all_nccl && r.has_identity && r.nccl;
  bool shared = false;
  for (std::size_t a = 0; a < n && !shared; ++a)
    for (std::size_t b = a + 1; b < n && !shared; ++b)
      shared = std::equal(all[a].uuid, all[a].uuid + 16, all[b].uuid);
  if (!shared && all_nccl) {
    // Bootstrap: rank 0's NCCL id reaches everyone through a (numbered) host broadcast.
    auto bcast = [this](void* data, std::size_t bytes) {
      broadcast(Span{data, bytes, DType::u8, Device::cpu(), Tier::host}, 0).wait();
    };
    return nccl::init(rank(), size(), dev.index, bcast, st.tracker);
  }
  return staged::init(st.host, dev.index);
}

Work Group::start(OpDesc op, ConstSpan in, Span out, void (CommImpl::*fn)(const Call&),
                  std::vector<std::shared_ptr<const void>> keep) const {
  GroupState& st = state();
  const Device dev = op.kind == OpKind::send ? in.device : out.device;
  CommImpl* impl = st.host.get();
  if (dev.is_cuda() && !st.device_via_host) {
    std::lock_guard lk(st.device_mu);
    if (!st.device) {
      st.device = make_device_transport(op.kind, dev);
      st.device_index = dev.index;
    }
    STRATA_CHECK(dev.index == st.device_index, "comm",
                 "{} communicates device buffers on cuda:{} ({} transport); a buffer on {} cannot "
                 "join it (one GPU per rank)",
                 st.desc, st.device_index, st.device->transport(), dev.str());
    impl = st.device.get();
  }
  op = st.tracker->begin(op);
  auto w = std::make_shared<WorkState>(op, st.desc, timeout());
  for (auto& k : keep) w->keep_alive(std::move(k));
  w->set_explain([s = s_, op](std::chrono::milliseconds budget) {
    return s->host->explain_stall(op, s->info, budget);
  });
  (impl->*fn)(Call{w, in, out, is_collective(op.kind) && st.validate.load()});
  return Work(std::move(w));
}

Work Group::all_reduce(ConstSpan in, Span out, ReduceOp op) const {
  check_pair("all_reduce", in, out);
  STRATA_CHECK(in.count == out.count, "comm", "all_reduce: input has {} elements, output {}",
               in.count, out.count);
  STRATA_CHECK(in.data == out.data || !overlaps(in.data, in.nbytes(), out.data, out.nbytes()),
               "comm", "all_reduce: input and output overlap without being the same buffer");
  OpDesc d{OpKind::all_reduce, in.dtype, in.count, op};
  return start(d, in, out, &CommImpl::all_reduce);
}

Work Group::reduce_scatter(ConstSpan in, Span out, ReduceOp op) const {
  check_pair("reduce_scatter", in, out);
  const std::size_t n = static_cast<std::size_t>(size());
  STRATA_CHECK(in.count == out.count * n, "comm",
               "reduce_scatter on {}: input has {} elements, which is not {} × the output's {} "
               "(pad the buffer to a multiple of the group size)",
               describe(), in.count, n, out.count);
  OpDesc d{OpKind::reduce_scatter, in.dtype, out.count, op};
  return start(d, in, out, &CommImpl::reduce_scatter);
}

Work Group::all_gather(ConstSpan in, Span out) const {
  check_pair("all_gather", in, out);
  const std::size_t n = static_cast<std::size_t>(size());
  STRATA_CHECK(out.count == in.count * n, "comm",
               "all_gather on {}: output has {} elements, not {} × the input's {}", describe(),
               out.count, n, in.count);
  OpDesc d{OpKind::all_gather, in.dtype, in.count, ReduceOp::sum};
  return start(d, in, out, &CommImpl::all_gather);
}

Work Group::broadcast(Span buf, int root) const {
  STRATA_CHECK(root >= 0 && root < size(), "comm", "broadcast: root {} is not a rank of {}", root,
               describe());
  OpDesc d{OpKind::broadcast, buf.dtype, buf.count, ReduceOp::sum, root};
  return start(d, ConstSpan(buf), buf, &CommImpl::broadcast);
}

Work Group::send(ConstSpan buf, int dst, int tag) const {
  STRATA_CHECK(dst >= 0 && dst < size(), "comm", "send: rank {} is not in {}", dst, describe());
  STRATA_CHECK(tag >= 0 && tag <= 32767, "comm", "send: tag {} is outside [0, 32767]", tag);
  OpDesc d{OpKind::send, buf.dtype, buf.count, ReduceOp::sum, dst, tag};
  return start(d, buf, Span{nullptr, 0, buf.dtype, buf.device, buf.tier}, &CommImpl::send);
}

Work Group::recv(Span buf, int src, int tag) const {
  STRATA_CHECK(src >= 0 && src < size(), "comm", "recv: rank {} is not in {}", src, describe());
  STRATA_CHECK(tag >= 0 && tag <= 32767, "comm", "recv: tag {} is outside [0, 32767]", tag);
  OpDesc d{OpKind::recv, buf.dtype, buf.count, ReduceOp::sum, src, tag};
  return start(d, ConstSpan(buf), buf, &CommImpl::recv);
}

Work Group::barrier() const {
  OpDesc d{OpKind::barrier, DType::u8, 0, ReduceOp::sum};
  return start(d, ConstSpan{}, Span{}, &CommImpl::barrier);
}

namespace {
Work keeping(Work w, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) w.keep_alive(t->storage());
  return w;
}
}  // namespace

Work Group::all_reduce(const Tensor& t, ReduceOp op) const {
  Span s = span_of(t, "all_reduce");
  return keeping(all_reduce(ConstSpan(s), s, op), {&t});
}

Work Group::all_reduce(const Tensor& in, const Tensor& out, ReduceOp op) const {
  return keeping(all_reduce(ConstSpan(span_of(in, "all_reduce")), span_of(out, "all_reduce"), op),
                 {&in, &out});
}

Work Group::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) const {
  return keeping(
      reduce_scatter(ConstSpan(span_of(in, "reduce_scatter")), span_of(out, "reduce_scatter"), op),
      {&in, &out});
}

Work Group::all_gather(const Tensor& in, const Tensor& out) const {
  return keeping(all_gather(ConstSpan(span_of(in, "all_gather")), span_of(out, "all_gather")),
                 {&in, &out});
}

Work Group::broadcast(const Tensor& t, int root) const {
  return keeping(broadcast(span_of(t, "broadcast"), root), {&t});
}

Work Group::send(const Tensor& t, int dst, int tag) const {
  return keeping(send(ConstSpan(span_of(t, "send")), dst, tag), {&t});
}

Work Group::recv(const Tensor& t, int src, int tag) const {
  return keeping(recv(span_of(t, "recv"), src, tag), {&t});
}

Group Group::split(int color, int key, std::string name) const {
  GroupState& st = state();
  if (color < 0) user_fail("comm", "split of {}: color must be >= 0, got {}", st.desc, color);
  const int n = size();
  // Exchange (color, key) through a numbered, timed all_gather first: a rank that never calls
  // split() is reported like any missing rank, and the transport's split cannot hang.
  std::int32_t mine[2] = {color, key};
  std::vector<std::int32_t> all(2 * static_cast<std::size_t>(n));
  all_gather(span(static_cast<const std::int32_t*>(mine), 2), span(all.data(), all.size())).wait();
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (all[2 * static_cast<std::size_t>(r)] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[2 * static_cast<std::size_t>(a) + 1] < all[2 * static_cast<std::size_t>(b) + 1];
  });
  auto child = std::make_shared<GroupState>();
  child->info.name = name.empty() ? fmt::format("{}.{}", st.info.name, color) : std::move(name);
  for (int m : members)
    child->info.world_ranks.push_back(st.info.world_ranks[static_cast<std::size_t>(m)]);
  child->desc = child->info.describe();
  child->tracker = std::make_shared<SeqTracker>(static_cast<int>(members.size()));
  child->host = st.host->split(color, key, child->tracker);
  const int my_index =
      static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  STRATA_CHECK(
      child->host->size() == static_cast<int>(members.size()) && child->host->rank() == my_index,
      "comm",
      "split of {}: the transport formed a group of {} with this rank at {}, "
      "expected {} at {}",
      st.desc, child->host->size(), child->host->rank(), members.size(), my_index);
  child->device_via_host = st.device_via_host;
  child->timeout_ms.store(st.timeout_ms.load());
  child->validate.store(st.validate.load());
  child->world_anchor = st.world_anchor;
  return Group(std::move(child));
}

}  // namespace strata::parallel
