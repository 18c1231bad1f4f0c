#include "framework/checkpoint/reclaim.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "framework/checkpoint/durable_fs.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {

namespace fs = std::filesystem;

namespace {

// The process's deletion queue and its thread (started on first use, joined at exit).
class Reclaimer {
 public:
  static Reclaimer& instance() {
    static Reclaimer r;
    return r;
  }
  ~Reclaimer() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();  // finishes the queue first
  }

  void push(const std::string& dir) {
    std::lock_guard lk(mu_);
    if (!known_.insert(dir).second) return;
    queue_.push_back(dir);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void run() {
    sched_param param{};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);  // best effort
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      const std::string dir = queue_.front();
      queue_.pop_front();
      busy_ = true;
      lk.unlock();
      std::error_code ec;
      fs::remove_all(dir, ec);  // a failure leaves it for the next retention
      lk.lock();
      busy_ = false;
      known_.erase(dir);
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> known_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

void reclaim(const std::string& dir) {
  const fs::path p(dir);
  const std::string parent = parent_dir(dir);
  // Unique per call, so a name still being deleted is never renamed onto or removed twice.
  static std::atomic<unsigned long> serial{0};
  const std::string trash =
      (fs::path(parent) / fmt::format("{}{}.{}.{}", kDeletingPrefix, p.filename().string(),
                                      static_cast<long>(::getpid()), serial.fetch_add(1)))
          .string();
  std::error_code ec;
  if (fs::exists(trash, ec)) fs::remove_all(trash, ec);  // an older leftover of the same name
  if (std::rename(dir.c_str(), trash.c_str()) != 0)
    fail("checkpoint", "cannot rename '{}' to '{}': {}", dir, trash, std::strerror(errno));
  fsync_dir(parent);
  Reclaimer::instance().push(trash);
}

void reclaim_leftovers(const std::string& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kDeletingPrefix, 0) == 0) Reclaimer::instance().push(e.path().string());
  }
}

void wait_for_reclaim() {
  Reclaimer::instance().wait();
}

}  // namespace strata::checkpoint
