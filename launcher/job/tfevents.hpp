// TensorBoard's event files (what TensorBoard and tf.summary read): TFRecord framing (length,
// masked CRC-32C of the length, the record, masked CRC-32C of the record) around Event protocol
// buffers holding scalar summaries, encoded by hand (no protobuf library). The reader checks
// every CRC and decodes what the writer writes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace strata::job {

// CRC-32C (Castagnoli), and TFRecord's masking of it.
std::uint32_t crc32c(const void* data, std::size_t n);
std::uint32_t masked_crc32c(const void* data, std::size_t n);

class TfEventsWriter {
 public:
  // Creates `dir` and dir/events.out.tfevents.<seconds>.<host>.<pid> (a new file per run, as
  // TensorBoard expects), starting with the file-version event. UserError when it cannot.
  explicit TfEventsWriter(const std::string& dir);
  ~TfEventsWriter();
  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;

  // One event holding scalars (tag, value) at `step`; flushed.
  void scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values);
  const std::string& path() const { return path_; }

 private:
  void record(const std::string& event);
  std::string path_;
  std::FILE* f_ = nullptr;
};

struct TfEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;                             // the first event's
  std::vector<std::pair<std::string, float>> scalars;  // (tag, simple_value)
};

// Every event of a file; UserError naming the file and the record when a CRC or the encoding is
// wrong.
std::vector<TfEvent> read_tfevents(const std::string& path);

}  // namespace strata::job
