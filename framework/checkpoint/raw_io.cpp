#include "framework/checkpoint/raw_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {

namespace {
// O_DIRECT is used only when the page size equals kDirectIoAlign (see RawWriter's constructor).
bool direct_io_safe() {
  static const bool ok = ::sysconf(_SC_PAGESIZE) == static_cast<long>(kDirectIoAlign);
  return ok;
}


// Bounce buffers for sources not aligned like their file offset: requests this large keep the
// device at full speed; three of them let one fill while two are in flight.
constexpr std::size_t kBounceBytes = 8u << 20;
constexpr int kBounceBuffers = 3;

std::uint64_t round_up(std::uint64_t x) {
  return (x + kDirectIoAlign - 1) / kDirectIoAlign * kDirectIoAlign;
}
std::uint64_t round_down(std::uint64_t x) {
  return x / kDirectIoAlign * kDirectIoAlign;
}

}  // namespace

void AlignedFree::operator()(void* p) const {
  std::free(p);
}

AlignedBuffer aligned_buffer(std::size_t bytes) {
  void* p = nullptr;
  const std::size_t n = std::max<std::size_t>(round_up(bytes), kDirectIoAlign);
  if (::posix_memalign(&p, kDirectIoAlign, n) != 0)
    fail("checkpoint", "cannot allocate a {}-byte I/O buffer", n);
  return AlignedBuffer(static_cast<unsigned char*>(p));
}

void pwrite_all(int fd, const void* src, std::size_t n, std::uint64_t offset,
                const std::string& what, int fallback_fd, bool* direct_ok) {
  const auto* c = static_cast<const unsigned char*>(src);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && fallback_fd >= 0) {
      // The file system took O_DIRECT at open but not this request: ordinary writes.
      fd = std::exchange(fallback_fd, -1);
      if (direct_ok) *direct_ok = false;
      continue;
    }
    if (w < 0)
      io_fail(errno, what,
              fmt::format("cannot write {} bytes at offset {} of '{}'", n, offset, what));
    if (w == 0)
      fail("checkpoint", "cannot write {} bytes at offset {} of '{}': no progress", n, offset,
           what);
    c += w;
    n -= static_cast<std::size_t>(w);
    offset += static_cast<std::uint64_t>(w);
  }
}

void pread_all(int fd, void* dst, std::size_t n, std::uint64_t offset, const std::string& what) {
  auto* c = static_cast<unsigned char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, c, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      fail("checkpoint", "cannot read {} bytes at offset {} of '{}': {}", n, offset, what,
           std::strerror(errno));
    if (r == 0) fail("checkpoint", "'{}' ends before offset {} (truncated)", what, offset);
    c += r;
    n -= static_cast<std::size_t>(r);
    offset += static_cast<std::uint64_t>(r);
  }
}

// Bounce buffers and the I/O thread that writes them.
struct RawWriter::Pipeline {
  struct Request {
    int buffer;
    std::size_t at;  // first byte within the buffer
    std::size_t bytes;
    std::uint64_t offset;
  };

  Pipeline(const std::string& path, int direct_fd, int fd)
      : path_(path), direct_fd_(direct_fd), fd_(fd) {
    for (int i = 0; i < kBounceBuffers; ++i) {
      buffers_.push_back(aligned_buffer(kBounceBytes));
      free_.push_back(i);
    }
    base_.assign(kBounceBuffers, 0);
    thread_ = std::thread([this] { run(); });
  }
  ~Pipeline() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // A free buffer (waits for one) that will hold the file bytes from `base` (aligned); rethrows
  // the I/O thread's error.
  int acquire(std::uint64_t base) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return !free_.empty() || error_; });
    if (error_) std::rethrow_exception(error_);
    const int b = free_.back();
    free_.pop_back();
    base_[static_cast<std::size_t>(b)] = base;
    return b;
  }
  unsigned char* data(int b) { return buffers_[static_cast<std::size_t>(b)].get(); }
  std::uint64_t base_offset(int b) const { return base_[static_cast<std::size_t>(b)]; }
  void release(int b) {
    {
      std::lock_guard lk(mu_);
      free_.push_back(b);
    }
    cv_.notify_all();
  }
  // Writes bytes [at, at + bytes) of buffer b at file offset `offset`, then frees b.
  void submit(int b, std::size_t at, std::size_t bytes, std::uint64_t offset) {
    {
      std::lock_guard lk(mu_);
      queue_.push_back({b, at, bytes, offset});
    }
    cv_.notify_all();
  }
  // Waits until every submitted request is written; rethrows the first error.
  void drain() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return (queue_.empty() && busy_ == 0) || error_; });
    if (error_) std::rethrow_exception(error_);
  }
  bool direct_ok() const { return direct_ok_.load(); }

 private:
  void run() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_
      const Request r = queue_.front();
      queue_.pop_front();
      ++busy_;
      lk.unlock();
      std::exception_ptr err;
      try {
        bool ok = direct_ok_.load();
        pwrite_all(ok ? direct_fd_ : fd_, data(r.buffer) + r.at, r.bytes, r.offset, path_,
                   ok ? fd_ : -1, &ok);
        if (!ok) direct_ok_ = false;
      } catch (...) {
        err = std::current_exception();
      }
      lk.lock();
      --busy_;
      free_.push_back(r.buffer);
      if (err && !error_) error_ = err;
      cv_.notify_all();
    }
  }

  std::string path_;
  int direct_fd_, fd_;
  std::vector<AlignedBuffer> buffers_;
  std::vector<std::uint64_t> base_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> free_;
  std::deque<Request> queue_;
  int busy_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::atomic<bool> direct_ok_{true};
  std::thread thread_;
};

RawWriter::RawWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) fail("checkpoint", "cannot open '{}' for writing: {}", path_, std::strerror(errno));
  // -1: not supported. Only where a page is one direct block: with larger pages (64 KiB on some
  // aarch64/ppc64le kernels) a cached page could hold both HDF5's buffered bytes and direct-written
  // ones, and the kernel could write the stale cached copy back over the direct write.
  direct_fd_ = direct_io_safe() ? ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_DIRECT) : -1;
  direct_ok_ = direct_fd_ >= 0;
}

RawWriter::~RawWriter() {
  pipe_.reset();
  close_fds();
}

void RawWriter::close_fds() noexcept {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (fd_ >= 0) ::close(fd_);
  direct_fd_ = fd_ = -1;
}

bool RawWriter::direct() const {
  return direct_ok_ && (!pipe_ || pipe_->direct_ok());
}

std::uint64_t RawWriter::direct_requests() const {
  return direct_requests_;
}

std::uint64_t RawWriter::direct_bytes() const {
  return direct_bytes_;
}

void RawWriter::plain_write(const unsigned char* p, std::size_t n, std::uint64_t offset) {
  if (n > 0) pwrite_all(fd_, p, n, offset, path_);
}

void RawWriter::emit(std::uint64_t from, std::uint64_t to, const unsigned char* mem, int buffer) {
  std::uint64_t a = std::min(round_up(from), to), b = std::max(round_down(to), a);
  if (!direct()) a = b = to;  // everything through the page cache
  plain_write(mem, static_cast<std::size_t>(a - from), from);
  plain_write(mem + (b - from), static_cast<std::size_t>(to - b), b);
  if (a < b) {
    ++direct_requests_;
    direct_bytes_ += b - a;
  }
  if (buffer >= 0) {
    if (a < b)
      pipe_->submit(buffer, static_cast<std::size_t>(a - pipe_->base_offset(buffer)),
                    static_cast<std::size_t>(b - a), a);
    else
      pipe_->release(buffer);
  } else if (a < b) {
    pwrite_all(direct_fd_, mem + (a - from), static_cast<std::size_t>(b - a), a, path_, fd_,
               &direct_ok_);
  }
}

void RawWriter::flush() {
  if (run_ == Run::copy) {
    const std::uint64_t from = std::max(run_start_, base_);
    emit(from, run_end_, pipe_->data(buf_) + (from - base_), buf_);
  } else if (run_ == Run::borrowed) {
    emit(run_start_, run_end_, mem_, -1);
  }
  run_ = Run::none;
  buf_ = -1;
  mem_ = nullptr;
}

void RawWriter::append_copy(std::uint64_t offset, const unsigned char* src, std::size_t n,
                            std::uint32_t* crc) {
  if (run_ != Run::copy || offset != run_end_) {
    flush();
    if (!pipe_) pipe_ = std::make_unique<Pipeline>(path_, direct_fd_, fd_);
    run_ = Run::copy;
    run_start_ = run_end_ = offset;
    base_ = round_down(offset);
    buf_ = pipe_->acquire(base_);
  }
  while (n > 0) {
    const std::uint64_t limit = base_ + kBounceBytes;
    const auto c = static_cast<std::size_t>(std::min<std::uint64_t>(n, limit - run_end_));
    unsigned char* dst = pipe_->data(buf_) + (run_end_ - base_);
    if (crc)
      *crc = crc32_copy(dst, src, c, *crc);
    else
      std::memcpy(dst, src, c);
    run_end_ += c;
    src += c;
    n -= c;
    if (run_end_ == limit) {  // full: out it goes, and the run continues in a fresh buffer
      const std::uint64_t from = std::max(run_start_, base_);
      emit(from, limit, pipe_->data(buf_) + (from - base_), buf_);
      base_ = limit;
      buf_ = pipe_->acquire(base_);
    }
  }
}

std::uint32_t RawWriter::write(std::uint64_t offset, const void* src, std::size_t n) {
  STRATA_CHECK(fd_ >= 0, "checkpoint", "'{}': write after close", path_);
  std::uint32_t crc = 0;
  append_copy(offset, static_cast<const unsigned char*>(src), n, &crc);
  return crc;
}

void RawWriter::write_borrowed(std::uint64_t offset, const void* src, std::size_t n) {
  STRATA_CHECK(fd_ >= 0, "checkpoint", "'{}': write after close", path_);
  const auto* p = static_cast<const unsigned char*>(src);
  if (!direct()) {  // no O_DIRECT here: nothing to gain from a run
    flush();
    plain_write(p, n, offset);
    return;
  }
  if ((reinterpret_cast<std::uintptr_t>(p) - offset) % kDirectIoAlign != 0) {
    append_copy(offset, p, n, nullptr);
    return;
  }
  if (run_ != Run::borrowed || offset != run_end_ || p != mem_ + (run_end_ - run_start_)) {
    flush();
    run_ = Run::borrowed;
    run_start_ = run_end_ = offset;
    mem_ = p;
  }
  run_end_ += n;
}

void RawWriter::sync_and_close() {
  STRATA_CHECK(fd_ >= 0, "checkpoint", "'{}': closed twice", path_);
  try {
    flush();
    if (pipe_) pipe_->drain();
  } catch (...) {
    pipe_.reset();
    close_fds();
    throw;
  }
  direct_ok_ = direct();
  pipe_.reset();
  if (::fsync(fd_) != 0) {
    const int e = errno;
    close_fds();
    io_fail(e, path_, fmt::format("fsync of '{}' failed", path_));
  }
  if (direct_fd_ >= 0) ::close(direct_fd_);
  direct_fd_ = -1;
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) io_fail(errno, path_, fmt::format("close of '{}' failed", path_));
}

// Read-ahead buffers and the I/O thread that fills them: kStreamBuffers slots, each holding
// kBounceBytes of the file from an aligned base, requested in file order.
struct RawReader::Stream {
  static constexpr int kSlots = kBounceBuffers;
  struct Slot {
    AlignedBuffer buf;
    std::uint64_t base = 0;
    std::size_t bytes = 0;  // filled (fewer than kBounceBytes only at the end of the file)
    enum { empty, requested, filled } state = empty;
    std::exception_ptr error;
  };

  Stream(const std::string& path, int direct_fd) : path_(path), fd_(direct_fd) {
    for (auto& s : slots_) s.buf = aligned_buffer(kBounceBytes);
    thread_ = std::thread([this] { run(); });
  }
  ~Stream() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  std::uint32_t read(std::uint64_t offset, unsigned char* dst, std::size_t n, std::uint32_t crc) {
    std::unique_lock lk(mu_);
    while (n > 0) {
      Slot* s = find(offset);
      if (!s) {
        restart(lk, round_down(offset));
        continue;
      }
      cv_.wait(lk, [&] { return s->state == Slot::filled; });
      if (s->error) std::rethrow_exception(s->error);
      const std::uint64_t end = s->base + s->bytes;
      if (offset >= end)
        fail("checkpoint", "'{}' ends before offset {} (truncated)", path_, offset);
      const auto c = static_cast<std::size_t>(std::min<std::uint64_t>(n, end - offset));
      const unsigned char* from = s->buf.get() + (offset - s->base);
      lk.unlock();  // the slot is ours until we recycle it; the I/O thread goes on meanwhile
      crc = crc32_copy(dst, from, c, crc);
      lk.lock();
      dst += c;
      offset += c;
      n -= c;
      if (offset >= s->base + kBounceBytes) request(*s, next_);  // used up: on to the next chunk
    }
    return crc;
  }

 private:
  Slot* find(std::uint64_t offset) {
    for (auto& s : slots_)
      if (s.state != Slot::empty && s.base <= offset && offset < s.base + kBounceBytes) return &s;
    return nullptr;
  }
  void request(Slot& s, std::uint64_t base) {
    s.base = base;
    s.bytes = 0;
    s.error = nullptr;
    s.state = Slot::requested;
    queue_.push_back(&s);
    next_ = base + kBounceBytes;
    cv_.notify_all();
  }
  // Drops what was read ahead (after the reads in flight land) and reads on from `base`.
  void restart(std::unique_lock<std::mutex>& lk, std::uint64_t base) {
    queue_.clear();
    cv_.wait(lk, [&] { return busy_ == 0; });
    for (auto& s : slots_) s.state = Slot::empty;
    next_ = base;
    for (auto& s : slots_) request(s, next_);
  }
  void run() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Slot* s = queue_.front();
      queue_.pop_front();
      ++busy_;
      const std::uint64_t base = s->base;
      lk.unlock();
      std::size_t got = 0;
      std::exception_ptr err;
      try {
        while (got < kBounceBytes) {
          const ssize_t r =
              ::pread(fd_, s->buf.get() + got, kBounceBytes - got, static_cast<off_t>(base + got));
          if (r < 0 && errno == EINTR) continue;
          if (r < 0)
            fail("checkpoint", "cannot read {} bytes at offset {} of '{}': {}", kBounceBytes - got,
                 base + got, path_, std::strerror(errno));
          if (r == 0) break;  // end of file
          got += static_cast<std::size_t>(r);
          if (got % kDirectIoAlign != 0) break;  // a short read ends at the end of the file
        }
      } catch (...) {
        err = std::current_exception();
      }
      lk.lock();
      --busy_;
      s->bytes = got;
      s->error = err;
      s->state = Slot::filled;
      cv_.notify_all();
    }
  }

  std::string path_;
  int fd_;
  Slot slots_[kSlots];
  std::uint64_t next_ = 0;
  std::deque<Slot*> queue_;
  int busy_ = 0;
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

RawReader::RawReader(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
  direct_fd_ = direct_io_safe() ? ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
}

RawReader::~RawReader() {
  stream_.reset();
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

void RawReader::idle() {
  stream_.reset();
}

std::uint32_t RawReader::read(std::uint64_t offset, void* dst, std::size_t n, std::uint32_t seed) {
  if (n == 0) return seed;
  if (direct_fd_ < 0) {
    pread_all(fd_, dst, n, offset, path_);
    return crc32(dst, n, seed);
  }
  if (!stream_) stream_ = std::make_unique<Stream>(path_, direct_fd_);
  return stream_->read(offset, static_cast<unsigned char*>(dst), n, seed);
}

}  // namespace strata::checkpoint
