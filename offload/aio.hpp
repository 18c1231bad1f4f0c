// AioQueue: asynchronous file reads and writes through io_uring (O_DIRECT-friendly: page-aligned
// buffers, offsets and sizes). A job is split into aio.block_size requests kept aio.queue_depth
// deep by aio.thread_count worker threads, each with its own ring; a job may wait for an earlier
// one (a read into a buffer after that buffer's write-back). Errors name the file, the offset and
// the system's reason, and are raised where the job is waited on — never swallowed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace strata::config {
struct Aio;
}

namespace strata::offload {

enum class IoOp { read, write };

// One request as the fault hook sees it.
struct IoRequestInfo {
  IoOp op;
  const std::string& path;
  std::uint64_t offset;  // in the file
  std::uint64_t bytes;
};

// Test hook in the I/O layer: return 0 to let the request run, or an errno (ENOSPC, EIO, ...)
// to fail it with that error as if the kernel had returned it. Called on a worker thread.
using IoFaultHook = std::function<int(const IoRequestInfo&)>;

// DeepSpeed's `aio` section.
struct AioOptions {
  std::uint64_t block_size = 1 << 20;  // bytes per request, a multiple of 4096
  int queue_depth = 8;                 // requests in flight per worker
  int thread_count = 1;                // workers, each with its own ring
  bool single_submit = false;          // one io_uring_submit per request instead of per batch
  bool overlap_events = true;          // refill the queue while requests are in flight
  IoFaultHook fault;                   // tests only
};

AioOptions aio_options(const config::Aio& aio);

// Throws UserError naming the reason when this kernel/container cannot run io_uring.
void check_io_uring_available();

class AioQueue {
 public:
  using Ticket = std::uint64_t;  // 0 means "no job"

  explicit AioQueue(const AioOptions& opts);
  // Waits for the requests in flight (the kernel must not touch freed buffers), drops jobs that
  // have not started, joins the workers. Never throws.
  ~AioQueue();
  AioQueue(const AioQueue&) = delete;
  AioQueue& operator=(const AioQueue&) = delete;

  // Queues `bytes` of `buf` to/from `fd` at `offset` (all multiples of 4096 for O_DIRECT files).
  // The job starts once every job in `after` has completed (0 entries are ignored); if one of
  // them failed, so does this job, with that error.
  Ticket submit(IoOp op, int fd, const std::string& path, void* buf, std::uint64_t bytes,
                std::uint64_t offset, std::initializer_list<Ticket> after = {});
  // Blocks until the job is complete; throws strata::Error ("[offload] ...") if it failed.
  void wait(Ticket t);
  // True when the job has finished (successfully or not); never blocks, never throws.
  bool done(Ticket t) const;
  // Waits for every job submitted so far; throws the first failure.
  void wait_all();

  const AioOptions& options() const { return opts_; }

 private:
  struct Job;
  struct Request {
    Job* job;
    std::uint64_t pos;    // offset inside the job
    std::uint64_t bytes;  // still to transfer
  };
  struct Job {
    Ticket id;
    IoOp op;
    int fd;
    std::string path;
    char* buf;
    std::uint64_t bytes, offset;
    int deps = 0;  // jobs in `after` not finished yet
    std::vector<Request> requests;
    std::size_t remaining = 0;
    std::string error;
  };
  struct Worker;

  void run(Worker& w);
  void shut_down() noexcept;  // stops accepting work, drains the kernel, joins the workers
  void enqueue_locked(Job& j);
  void finish_request_locked(Request& r, const std::string& error);
  void finish_job_locked(Job& j);
  void dependency_done_locked(Job& j, const std::string& error);

  AioOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  bool stop_ = false;
  Ticket next_ = 1;
  std::map<Ticket, std::unique_ptr<Job>> jobs_;      // not yet finished
  std::multimap<Ticket, Job*> waiting_;              // dependency -> job waiting for it
  std::deque<Request*> ready_;                       // requests not yet handed to a worker
  std::map<Ticket, std::string> failed_;             // finished with an error
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace strata::offload
