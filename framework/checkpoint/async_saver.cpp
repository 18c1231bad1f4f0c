#include "framework/checkpoint/async_saver.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string_view>

namespace strata::checkpoint {

namespace {

WriterPriority priority_from_env(WriterPriority fallback) {
  const char* v = std::getenv("STRATA_CHECKPOINT_WRITER_PRIORITY");
  if (!v || !*v) return fallback;
  const std::string_view s(v);
  if (s == "idle") return WriterPriority::idle;
  if (s == "low") return WriterPriority::low;
  if (s == "normal") return WriterPriority::normal;
  user_fail("checkpoint", "STRATA_CHECKPOINT_WRITER_PRIORITY='{}': expected idle, low or normal",
            s);
}

// Lowers the calling thread's CPU priority (best effort: a refusal leaves it as it was).
void lower_this_thread(WriterPriority p) {
  if (p == WriterPriority::idle) {
    sched_param param{};
    param.sched_priority = 0;
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) == 0) return;
  }
  if (p != WriterPriority::normal)
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
}

}  // namespace

AsyncSaver::AsyncSaver(AllRanksOk all_ok, WarningSink on_unreported_error, WriterPriority priority)
    : all_ok_(std::move(all_ok)),
      on_unreported_error_(std::move(on_unreported_error)),
      priority_(priority_from_env(priority)) {
  STRATA_CHECK(static_cast<bool>(all_ok_), "checkpoint", "AsyncSaver needs an AllRanksOk callback");
}

AsyncSaver::~AsyncSaver() {
  if (worker_.joinable()) worker_.join();
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = std::exchange(error_, nullptr);
  }
  if (!e || !on_unreported_error_) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    on_unreported_error_(fmt::format("background checkpoint save failed: {}", ex.what()));
  } catch (...) {
    on_unreported_error_("background checkpoint save failed with an unknown error");
  }
}

void AsyncSaver::join_and_rethrow() {
  if (worker_.joinable()) worker_.join();
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = std::exchange(error_, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

void AsyncSaver::submit(SaveJob job) {
  join_and_rethrow();
  auto owned = std::make_shared<SaveJob>(std::move(job));
  done_ = false;
  worker_ = std::thread([this, owned] {
    lower_this_thread(priority_);
    std::optional<SaveResult> result;
    std::exception_ptr error;
    try {
      std::vector<SliceRef> refs;
      refs.reserve(owned->slices.size());
      for (const auto& s : owned->slices) refs.push_back(s.ref());
      result = save_checkpoint(owned->spec, refs, owned->rank_state, all_ok_, gather_);
    } catch (...) {
      error = std::current_exception();
    }
    owned->slices.clear();  // give the staging memory back as soon as it is written
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error)
        error_ = error;
      else
        last_ = std::move(result);
    }
    done_ = true;
  });
}

void AsyncSaver::poll() {
  if (worker_.joinable() && done_) join_and_rethrow();
  if (!worker_.joinable()) {
    std::exception_ptr e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      e = std::exchange(error_, nullptr);
    }
    if (e) std::rethrow_exception(e);
  }
}

void AsyncSaver::wait() {
  join_and_rethrow();
}

bool AsyncSaver::in_flight() const {
  return !done_;
}

std::optional<SaveResult> AsyncSaver::last_result() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

}  // namespace strata::checkpoint
