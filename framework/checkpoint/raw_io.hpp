// The bytes of contiguous HDF5 datasets, written and read at the file offsets HDF5 allocated for
// them, without HDF5 in the data path. A rank file's datasets lie back to back in the order they
// were created (h5_io's create_file arranges it), so consecutive writes form one long run of the
// file: its whole 4 KiB blocks go to the disk with O_DIRECT in large requests (no page-cache
// copy, no kernel CPU on the data) — from aligned bounce buffers that are checksummed while
// filled and written by an I/O thread while the next one fills, or straight from the caller's
// memory when it is laid out like the file (a staging arena); the partial blocks at a run's ends
// go through the page cache, so neighbouring bytes (HDF5's) are never touched. Falls back to
// ordinary writes where the file system refuses O_DIRECT (tmpfs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace strata::checkpoint {

// O_DIRECT granularity: file offsets, lengths and memory addresses of direct requests.
inline constexpr std::size_t kDirectIoAlign = 4096;

// A buffer of `bytes` aligned to kDirectIoAlign (not charged to the memory ledger: I/O scratch).
struct AlignedFree {
  void operator()(void* p) const;
};
using AlignedBuffer = std::unique_ptr<unsigned char, AlignedFree>;
AlignedBuffer aligned_buffer(std::size_t bytes);

// Writes raw dataset bytes into a file another library (HDF5) has created and laid out. One
// thread calls it. Errors throw strata::Error naming the file (an I/O thread's error at the next
// call or at sync_and_close).
class RawWriter {
 public:
  explicit RawWriter(std::string path);
  ~RawWriter();
  RawWriter(const RawWriter&) = delete;
  RawWriter& operator=(const RawWriter&) = delete;

  // Writes n bytes of src at file offset `offset` and returns their CRC-32 (computed while
  // copying them into a bounce buffer). src may be reused when this returns.
  std::uint32_t write(std::uint64_t offset, const void* src, std::size_t n);
  // Writes n bytes whose CRC the caller knows. src must stay valid and unchanged until
  // sync_and_close(): where src and offset are aligned alike it is written from src itself,
  // without a copy.
  void write_borrowed(std::uint64_t offset, const void* src, std::size_t n);
  // Writes what is pending, waits for it, fsyncs and closes; throws if any of it failed.
  void sync_and_close();
  // Whether whole blocks go out with O_DIRECT (false: the file system refused it).
  bool direct() const;
  // Requests written so far with O_DIRECT, and bytes in them (for tests and benchmarks).
  std::uint64_t direct_requests() const;
  std::uint64_t direct_bytes() const;

 private:
  struct Pipeline;
  enum class Run { none, copy, borrowed };
  void append_copy(std::uint64_t offset, const unsigned char* src, std::size_t n,
                   std::uint32_t* crc);
  // Writes the run's bytes in [from, to) held at mem (mem corresponds to `from`): partial
  // blocks through the page cache now, whole blocks with O_DIRECT (buffer b's I/O thread when
  // b >= 0, else here and now).
  void emit(std::uint64_t from, std::uint64_t to, const unsigned char* mem, int buffer);
  void flush();
  void plain_write(const unsigned char* p, std::size_t n, std::uint64_t offset);
  void close_fds() noexcept;

  std::string path_;
  int fd_ = -1;             // ordinary writes
  int direct_fd_ = -1;      // O_DIRECT writes, or -1
  bool direct_ok_ = false;  // O_DIRECT opened, and no request rejected (EINVAL) yet
  std::unique_ptr<Pipeline> pipe_;
  // The run being built: file bytes [run_start_, run_end_). Copy runs hold them in bounce buffer
  // buf_ from file offset base_ (aligned); borrowed runs at mem_ (the byte for run_start_).
  Run run_ = Run::none;
  std::uint64_t run_start_ = 0, run_end_ = 0, base_ = 0;
  int buf_ = -1;
  const unsigned char* mem_ = nullptr;
  std::uint64_t direct_requests_ = 0, direct_bytes_ = 0;
};

// Reads a file's bytes ahead of the caller, in order, the way RawWriter writes them: an I/O
// thread fills aligned 8 MiB buffers with O_DIRECT from where the caller reads on, and the caller
// copies its ranges out of them, checksumming while it copies. A range elsewhere than the
// stream's position restarts the stream there. Where O_DIRECT is refused, plain preads straight
// into the caller's memory. One thread calls it.
class RawReader {
 public:
  RawReader(std::string path, int fd);  // fd: the file opened for ordinary reads (not owned)
  ~RawReader();
  RawReader(const RawReader&) = delete;
  RawReader& operator=(const RawReader&) = delete;

  // Copies bytes [offset, offset + n) of the file to dst and returns their CRC-32, continuing
  // from `seed`. A range past the end of the file is an error (truncated).
  std::uint32_t read(std::uint64_t offset, void* dst, std::size_t n, std::uint32_t seed = 0);
  bool direct() const { return direct_fd_ >= 0; }
  // Frees the read-ahead buffers and stops the I/O thread until the next read.
  void idle();

 private:
  struct Stream;
  std::string path_;
  int fd_;
  int direct_fd_ = -1;
  std::unique_ptr<Stream> stream_;
};

// Writes exactly n bytes at `offset` of fd. When fd is an O_DIRECT descriptor and the file
// system rejects the request (EINVAL), writes through `fallback_fd` instead and clears
// *direct_ok. `what` names the file in errors.
void pwrite_all(int fd, const void* src, std::size_t n, std::uint64_t offset,
                const std::string& what, int fallback_fd = -1, bool* direct_ok = nullptr);
// Reads exactly n bytes at `offset` of fd (a short read is an error: the file is truncated).
void pread_all(int fd, void* dst, std::size_t n, std::uint64_t offset, const std::string& what);

}  // namespace strata::checkpoint
