#include "parallel/comm/mpi/mpi_comm.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

#include "framework/core/tensor.hpp"
#include "parallel/comm/host_reduce.hpp"
#include "parallel/comm/mpi/datatypes.hpp"
#include "parallel/comm/mpi/mpi_check.hpp"
#include "parallel/comm/overlap.hpp"

namespace strata::parallel::mpi {

namespace {

constexpr int kQueryTag = 1;
int reply_tag(std::int64_t qid) {
  return 2 + static_cast<int>(qid % 30000);
}

int checked_count(const OpDesc& op, std::uint64_t n) {
  if (n > static_cast<std::uint64_t>(INT_MAX))
    fail("comm", "{}: {} elements exceed MPI's count limit of {}; split it into buckets", op.str(),
         n, INT_MAX);
  return static_cast<int>(n);
}


// A buffer charged to the ledger as comm buffers, for the rare call that must stage.
std::shared_ptr<Storage> staging(std::size_t count, DType t, Tier tier) {
  Tensor s = Tensor::empty(Shape{static_cast<std::int64_t>(count)}, t,
                           TensorOptions{Device::cpu(), tier, Category::comm});
  return s.storage();
}

std::array<std::int64_t, 4> pack(const OpDesc& d) {
  return {static_cast<std::int64_t>(d.seq),
          static_cast<std::int64_t>(d.kind) | (static_cast<std::int64_t>(d.dtype) << 8) |
              (static_cast<std::int64_t>(d.reduce) << 16),
          static_cast<std::int64_t>(d.count), d.peer};
}

OpDesc unpack(const std::int64_t* w) {
  OpDesc d;
  d.seq = static_cast<std::uint64_t>(w[0]);
  d.kind = static_cast<OpKind>(w[1] & 0xff);
  d.dtype = static_cast<DType>((w[1] >> 8) & 0xff);
  d.reduce = static_cast<ReduceOp>((w[1] >> 16) & 0xff);
  d.count = static_cast<std::uint64_t>(w[2]);
  d.peer = static_cast<int>(w[3]);
  return d;
}

// "rank 3", "ranks 0, 1, 3", or with world ranks when they differ: "rank 1 (world rank 3), ...".
std::string join_ranks(const std::vector<int>& r, const GroupInfo& info) {
  bool plain = true;
  for (int x : r) plain = plain && info.rank_name(x) == fmt::format("rank {}", x);
  if (plain) return fmt::format("{} {}", r.size() == 1 ? "rank" : "ranks", fmt::join(r, ", "));
  std::vector<std::string> names;
  for (int x : r) names.push_back(info.rank_name(x));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::shared_ptr<MpiComm> MpiComm::create(std::shared_ptr<Runtime> rt, MPI_Comm comm, MPI_Comm ctrl,
                                         std::shared_ptr<SeqTracker> tracker) {
  std::shared_ptr<MpiComm> c(new MpiComm());
  c->rt_ = std::move(rt);
  c->comm_ = comm;
  c->ctrl_ = ctrl;
  c->tracker_ = std::move(tracker);
  {
    auto lk = c->rt_->lock();
    STRATA_CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    STRATA_CHECK_MPI(MPI_Comm_set_errhandler(ctrl, MPI_ERRORS_RETURN));
    STRATA_CHECK_MPI(MPI_Comm_rank(comm, &c->rank_));
    STRATA_CHECK_MPI(MPI_Comm_size(comm, &c->size_));
    c->post_query_recv_locked();
  }
  c->rt_->add_poller(c);
  return c;
}

MpiComm::~MpiComm() {
  if (!rt_) return;
  auto lk = rt_->lock();
  if (!rt_->shut_down()) release_locked();
}

void MpiComm::release_locked() {
  if (released_) return;
  released_ = true;
  if (query_req_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&query_req_);
    MPI_Wait(&query_req_, MPI_STATUS_IGNORE);
  }
  for (auto& o : outgoing_) {
    int flag = 0;
    if (o->req != MPI_REQUEST_NULL) MPI_Test(&o->req, &flag, MPI_STATUS_IGNORE);
    if (o->req != MPI_REQUEST_NULL) {
      // Still being sent (its peer is gone or slow): let MPI finish it; the 128-byte buffer
      // is deliberately left allocated since MPI may still read it.
      MPI_Request_free(&o->req);
      (void)o.release();
    }
  }
  outgoing_.clear();
  if (ctrl_ != MPI_COMM_NULL) MPI_Comm_free(&ctrl_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiComm::check_live_locked() const {
  if (released_ || rt_->shut_down())
    fail("comm",
         "the communication runtime was finalized (finalize_world); this group can no "
         "longer communicate");
}

void MpiComm::post_query_recv_locked() {
  STRATA_CHECK_MPI(MPI_Irecv(query_in_.data(), static_cast<int>(query_in_.size()), MPI_INT64_T,
                             MPI_ANY_SOURCE, kQueryTag, ctrl_, &query_req_));
}

void MpiComm::poll_locked() {
  if (released_) return;
  if (query_req_ != MPI_REQUEST_NULL) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Test(&query_req_, &flag, &st) == MPI_SUCCESS && flag) {
      answer_locked(st.MPI_SOURCE, query_in_);
      post_query_recv_locked();
    }
  }
  while (!outgoing_.empty()) {
    int flag = 0;
    MPI_Test(&outgoing_.front()->req, &flag, MPI_STATUS_IGNORE);
    if (!flag) break;
    outgoing_.pop_front();
  }
}

void MpiComm::answer_locked(int asker, const Query& q) {
  const TrackerView v = tracker_->view_for(asker, static_cast<std::uint64_t>(q[1]));
  auto out = std::make_unique<Outgoing>();
  Reply& r = out->msg;
  r[0] = q[0];
  r[1] = static_cast<std::int64_t>(v.posted);
  if (v.at) {
    r[2] = 1;
    auto p = pack(*v.at);
    std::copy(p.begin(), p.end(), r.begin() + 3);
  }
  if (v.last) {
    r[7] = 1;
    auto p = pack(*v.last);
    std::copy(p.begin(), p.end(), r.begin() + 8);
  }
  r[12] = static_cast<std::int64_t>(v.sends_to_peer);
  r[13] = static_cast<std::int64_t>(v.recvs_from_peer);
  if (MPI_Isend(r.data(), static_cast<int>(r.size()), MPI_INT64_T, asker, reply_tag(q[0]), ctrl_,
                &out->req) == MPI_SUCCESS)
    outgoing_.push_back(std::move(out));
}

void MpiComm::launch(const Call& c, PostFn post, std::function<void(Pending&)> finish,
                     std::vector<std::shared_ptr<const void>> keep, CheckFn check) {
  auto p = std::make_unique<Pending>();
  p->work = c.work;
  p->finish = std::move(finish);
  p->keep = std::move(keep);
  p->keep.push_back(shared_from_this());
  c.work->set_driver(rt_, rt_->spin());
  const OpDesc op = c.work->op();
  std::shared_ptr<Storage> all;  // validation: every rank's (seq, op, dtype, count, root)
  {
    auto lk = rt_->lock();
    check_live_locked();
    if (!c.validate) {
      post(p->reqs);
    } else {
      // Exchange the descriptors on the control communicator; the real call is posted only
      // when every rank posted the same one, so a mismatch never reaches MPI's matching.
      auto mine = std::make_shared<std::array<std::int64_t, 4>>(pack(op));
      all = staging(4 * static_cast<std::size_t>(size_), DType::i64, Tier::host);
      MPI_Request r;
      STRATA_CHECK_MPI(
          MPI_Iallgather(mine->data(), 4, MPI_INT64_T, all->data(), 4, MPI_INT64_T, ctrl_, &r));
      p->reqs.push_back(r);
      p->keep.push_back(mine);
      p->keep.push_back(all);
    }
  }
  p->advance = [this, all, op, post = std::move(post), check = std::move(check),
                group = c.work->group()](Pending& pp) mutable -> bool {
    if (all) {
      const auto* w = static_cast<const std::int64_t*>(all->data());
      all.reset();
      std::vector<std::string> odd;
      for (int r = 0; r < size_; ++r) {
        const OpDesc d = unpack(w + 4 * r);
        if (d.seq != op.seq || !d.same_call(op))
          odd.push_back(fmt::format("rank {} posted {}", r, d.str()));
      }
      if (!odd.empty())
        fail("comm", "{} on {}: the ranks are out of step: this rank ({}) posted {}, but {}",
             op.str(), group, rank_, op.str(), fmt::join(odd, "; "));
      pp.reqs.clear();
      post(pp.reqs);
      return true;
    }
    if (check) check(pp);
    return false;
  };
  rt_->submit(std::move(p));
}

void MpiComm::all_reduce(const Call& c) {
  const OpDesc op = c.work->op();
  const int n = checked_count(op, op.count);
  const void* send = c.in.data == c.out.data ? MPI_IN_PLACE : c.in.data;
  void* out = c.out.data;
  const MPI_Datatype type = datatype(op.dtype);
  const MPI_Op mop = reduction(op.reduce, op.dtype);
  std::function<void(Pending&)> finish;
  if (op.reduce == ReduceOp::avg)
    finish = [out, op, size = size_](Pending&) { host_divide(out, op.count, op.dtype, size); };
  launch(
      c,
      [=, this](std::vector<MPI_Request>& reqs) {
        MPI_Request r;
        STRATA_CHECK_MPI(MPI_Iallreduce(send, out, n, type, mop, comm_, &r));
        reqs.push_back(r);
      },
      std::move(finish));
}

void MpiComm::reduce_scatter(const Call& c) {
  const OpDesc op = c.work->op();
  const int n = checked_count(op, op.count);
  checked_count(op, op.count * static_cast<std::uint64_t>(size_));
  const MPI_Datatype type = datatype(op.dtype);
  const MPI_Op mop = reduction(op.reduce, op.dtype);
  const void* in = c.in.data;
  void* out = c.out.data;
  const std::size_t bytes = c.out.nbytes();
  std::vector<std::shared_ptr<const void>> keep;
  void* target = out;
  if (overlaps(c.in.data, c.in.nbytes(), c.out.data, bytes)) {
    // The output lies inside the input (e.g. a rank's own shard of a flat buffer): MPI cannot
    // write there while reading the input, so the block lands in a ledgered staging buffer.
    auto s = staging(op.count, op.dtype, c.out.tier);
    target = s->data();
    keep.push_back(s);
  }
  std::function<void(Pending&)> finish;
  if (op.reduce == ReduceOp::avg || target != out)
    finish = [=, size = size_](Pending&) {
      if (op.reduce == ReduceOp::avg) host_divide(target, op.count, op.dtype, size);
      if (target != out) std::memcpy(out, target, bytes);
    };
  launch(
      c,
      [=, this](std::vector<MPI_Request>& reqs) {
        MPI_Request r;
        STRATA_CHECK_MPI(MPI_Ireduce_scatter_block(in, target, n, type, mop, comm_, &r));
        reqs.push_back(r);
      },
      std::move(finish), std::move(keep));
}

void MpiComm::all_gather(const Call& c) {
  const OpDesc op = c.work->op();
  const int n = checked_count(op, op.count);
  checked_count(op, op.count * static_cast<std::uint64_t>(size_));
  const MPI_Datatype type = datatype(op.dtype);
  const std::size_t block = c.in.nbytes();
  void* out = c.out.data;
  const void* send = c.in.data;
  std::vector<std::shared_ptr<const void>> keep;
  if (block > 0 &&
      send == static_cast<const char*>(out) + block * static_cast<std::size_t>(rank_)) {
    send = MPI_IN_PLACE;  // the input already sits in this rank's block of the output
  } else if (overlaps(send, block, out, c.out.nbytes())) {
    auto s = staging(op.count, op.dtype, c.in.tier);
    std::memcpy(s->data(), send, block);
    send = s->data();
    keep.push_back(s);
  }
  launch(
      c,
      [=, this](std::vector<MPI_Request>& reqs) {
        MPI_Request r;
        STRATA_CHECK_MPI(MPI_Iallgather(send, n, type, out, n, type, comm_, &r));
        reqs.push_back(r);
      },
      nullptr, std::move(keep));
}

void MpiComm::broadcast(const Call& c) {
  const OpDesc op = c.work->op();
  const int n = checked_count(op, op.count);
  const MPI_Datatype type = datatype(op.dtype);
  void* buf = c.out.data;
  launch(
      c,
      [=, this](std::vector<MPI_Request>& reqs) {
        MPI_Request r;
        STRATA_CHECK_MPI(MPI_Ibcast(buf, n, type, op.peer, comm_, &r));
        reqs.push_back(r);
      },
      nullptr);
}

void MpiComm::send(const Call& c) {
  const OpDesc op = c.work->op();
  const int n = checked_count(op, op.count);
  const MPI_Datatype type = datatype(op.dtype);
  const void* buf = c.in.data;
  launch(
      c,
      [=, this](std::vector<MPI_Request>& reqs) {
        MPI_Request r;
        STRATA_CHECK_MPI(MPI_Isend(buf, n, type, op.peer, op.tag, comm_, &r));
        reqs.push_back(r);
      },
      nullptr);
}

void MpiComm::recv(const Call& c) {
  const OpDesc op = c.work->op();
  const int n = checked_count(op, op.count);
  const MPI_Datatype type = datatype(op.dtype);
  void* buf = c.out.data;
  auto check = [=](Pending& p) {
    int got = 0;
    STRATA_CHECK_MPI(MPI_Get_count(&p.statuses.at(0), type, &got));
    if (got != n)
      fail("comm", "{}: the message has {} elements, the receive expects {}", op.str(), got, n);
  };
  launch(
      c,
      [=, this](std::vector<MPI_Request>& reqs) {
        MPI_Request r;
        STRATA_CHECK_MPI(MPI_Irecv(buf, n, type, op.peer, op.tag, comm_, &r));
        reqs.push_back(r);
      },
      nullptr, {}, check);
}

void MpiComm::barrier(const Call& c) {
  launch(
      c,
      [this](std::vector<MPI_Request>& reqs) {
        MPI_Request r;
        STRATA_CHECK_MPI(MPI_Ibarrier(comm_, &r));
        reqs.push_back(r);
      },
      nullptr);
}

std::shared_ptr<CommImpl> MpiComm::split(int color, int key, std::shared_ptr<SeqTracker> tracker) {
  MPI_Comm nc = MPI_COMM_NULL, nctrl = MPI_COMM_NULL;
  {
    auto lk = rt_->lock();
    check_live_locked();
    STRATA_CHECK_MPI(MPI_Comm_split(comm_, color, key, &nc));
    STRATA_CHECK_MPI(MPI_Comm_dup(nc, &nctrl));
  }
  return create(rt_, nc, nctrl, std::move(tracker));
}

std::string MpiComm::explain_stall(const OpDesc& op, const GroupInfo& info,
                                   std::chrono::milliseconds budget) {
  std::vector<int> peers;
  if (is_collective(op.kind)) {
    for (int r = 0; r < size_; ++r)
      if (r != rank_) peers.push_back(r);
  } else if (op.peer != rank_) {
    peers.push_back(op.peer);
  }
  if (peers.empty()) return {};
  const std::int64_t qid = next_qid_.fetch_add(1);
  const int tag = reply_tag(qid);
  std::vector<Reply> replies(peers.size());
  std::vector<MPI_Request> reqs(peers.size(), MPI_REQUEST_NULL);
  std::vector<bool> got(peers.size(), false);
  {
    auto lk = rt_->lock();
    if (released_ || rt_->shut_down()) return {};
    for (std::size_t i = 0; i < peers.size(); ++i) {
      STRATA_CHECK_MPI(MPI_Irecv(replies[i].data(), static_cast<int>(replies[i].size()),
                                 MPI_INT64_T, peers[i], tag, ctrl_, &reqs[i]));
      auto q = std::make_unique<Outgoing>();
      q->msg[0] = qid;
      q->msg[1] = static_cast<std::int64_t>(op.seq);
      STRATA_CHECK_MPI(
          MPI_Isend(q->msg.data(), 2, MPI_INT64_T, peers[i], kQueryTag, ctrl_, &q->req));
      outgoing_.push_back(std::move(q));
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (true) {
    std::size_t n_got = 0;
    {
      auto lk = rt_->lock();
      if (released_) return {};
      for (std::size_t i = 0; i < peers.size(); ++i) {
        if (!got[i]) {
          int flag = 0;
          MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
          got[i] = flag != 0;
        }
        n_got += got[i];
      }
      poll_locked();  // answer peers that ask us meanwhile
    }
    if (n_got == peers.size() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  {
    auto lk = rt_->lock();
    for (std::size_t i = 0; i < peers.size(); ++i) {
      if (got[i] || released_) continue;
      MPI_Status st;
      MPI_Cancel(&reqs[i]);
      MPI_Wait(&reqs[i], &st);
      int cancelled = 0;
      MPI_Test_cancelled(&st, &cancelled);
      got[i] = !cancelled;
    }
  }

  std::vector<std::string> parts;
  std::vector<int> silent;
  if (is_collective(op.kind)) {
    std::vector<int> arrived{rank_};
    std::vector<std::string> missing, diverged;
    for (std::size_t i = 0; i < peers.size(); ++i) {
      const int p = peers[i];
      const Reply& r = replies[i];
      if (!got[i] || r[0] != qid) {
        silent.push_back(p);
        continue;
      }
      const auto posted = static_cast<std::uint64_t>(r[1]);
      if (posted < op.seq) {
        missing.push_back(
            posted == 0
                ? fmt::format("{} (it has posted no collective on this group)", info.rank_name(p))
                : fmt::format("{} (it has posted {} collective{} on this group, the "
                              "last {})",
                              info.rank_name(p), posted, posted == 1 ? "" : "s",
                              r[7] ? unpack(r.data() + 8).str() : "unknown"));
      } else if (r[2] && !unpack(r.data() + 3).same_call(op)) {
        diverged.push_back(fmt::format("{} is out of step: its collective #{} was {}",
                                       info.rank_name(p), op.seq, unpack(r.data() + 3).str()));
      } else {
        arrived.push_back(p);
      }
    }
    std::sort(arrived.begin(), arrived.end());
    if (!missing.empty())
      parts.push_back(fmt::format("had not arrived: {}", fmt::join(missing, ", ")));
    for (auto& d : diverged) parts.push_back(d);
    if (!missing.empty() || !diverged.empty() || !silent.empty())
      parts.push_back(fmt::format("arrived: {}", join_ranks(arrived, info)));
  } else {
    const int p = peers[0];
    const Reply& r = replies[0];
    if (!got[0] || r[0] != qid) {
      silent.push_back(p);
    } else if (op.kind == OpKind::recv) {
      const auto sends = static_cast<std::uint64_t>(r[12]);
      parts.push_back(sends < op.seq
                          ? fmt::format("{} has posted only {} send{} to this rank (this is "
                                        "receive #{} from it)",
                                        info.rank_name(p), sends, sends == 1 ? "" : "s", op.seq)
                          : fmt::format("{} has posted {} sends to this rank; the message did "
                                        "not match (different tag or size?)",
                                        info.rank_name(p), sends));
    } else {
      const auto recvs = static_cast<std::uint64_t>(r[13]);
      parts.push_back(recvs < op.seq
                          ? fmt::format("{} has posted only {} receive{} from this rank (this is "
                                        "send #{} to it)",
                                        info.rank_name(p), recvs, recvs == 1 ? "" : "s", op.seq)
                          : fmt::format("{} has posted {} receives from this rank; the message "
                                        "did not match (different tag or size?)",
                                        info.rank_name(p), recvs));
    }
  }
  if (!silent.empty())
    parts.push_back(
        fmt::format("{} did not answer within {} ms (blocked outside Strata's "
                    "communication, or dead)",
                    join_ranks(silent, info), budget.count()));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace strata::parallel::mpi
