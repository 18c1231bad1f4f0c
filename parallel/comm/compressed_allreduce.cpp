#include "parallel/comm/compressed_allreduce.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

namespace strata::parallel {

namespace {

// The RMS of x in double (one element after another), rounded to f32: the compression scale.
float rms(const float* x, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(std::sqrt(s) / std::sqrt(static_cast<double>(n)));
}

// Compresses x[0, n) (n a multiple of 8): signs into bits (MSB first, x >= 0 or NaN is 1), the
// error x - scale·sign into err; returns the scale.
float compress(const float* x, std::size_t n, float* err, std::uint8_t* bits) {
  const float scale = rms(x, n);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint8_t byte = 0;
    for (std::size_t k = 0; k < 8; ++k) {
      const bool pos = !(x[i + k] < 0.0f);
      byte = static_cast<std::uint8_t>(byte | (pos ? 0x80u >> k : 0u));
      err[i + k] = x[i + k] - (pos ? scale : -scale);
    }
    bits[i / 8] = byte;
  }
  return scale;
}

inline float sign_of(const std::uint8_t* bits, std::size_t i) {
  return (bits[i / 8] & (0x80u >> (i % 8))) ? 1.0f : -1.0f;
}

}  // namespace

void compressed_allreduce(const Group& g, std::span<const optim::ErrorFeedbackTensor> tensors) {
  const int N = g.size();
  if (N == 1 || tensors.empty()) return;
  const int me = g.rank();
  const auto n_ranks = static_cast<std::size_t>(N);
  const std::size_t T = tensors.size();
  // Per tensor: its chunk length and its chunk's byte offset inside one rank's block of signs.
  std::vector<std::size_t> chunk(T), at(T);
  std::size_t block = 0;  // bytes of signs per (sender, receiver) pair
  for (std::size_t t = 0; t < T; ++t) {
    chunk[t] = optim::onebit_padded_size(tensors[t].n, N) / n_ranks;
    at[t] = block;
    block += chunk[t] / 8;
  }
  // ---- worker: compress each padded tensor + its worker error ----
  std::vector<std::uint8_t> send(n_ranks * block), recv(n_ranks * block);
  std::vector<float> scales(T), all_scales(n_ranks * T);
  std::vector<float> buf;
  std::vector<std::uint8_t> bits;
  for (std::size_t t = 0; t < T; ++t) {
    const optim::ErrorFeedbackTensor& x = tensors[t];
    const std::size_t padded = chunk[t] * n_ranks;
    buf.assign(padded, 0.0f);
    for (std::size_t i = 0; i < x.n; ++i) buf[i] = x.data[i];
    for (std::size_t i = 0; i < padded; ++i) buf[i] = buf[i] + x.worker_error[i];
    bits.assign(padded / 8, 0);
    scales[t] = compress(buf.data(), padded, x.worker_error, bits.data());
    for (std::size_t j = 0; j < n_ranks; ++j)
      std::copy_n(bits.data() + j * chunk[t] / 8, chunk[t] / 8, send.data() + j * block + at[t]);
  }
  // ---- exchange 1: chunk j of every rank's signs to rank j; every rank's scales to all ----
  {
    std::vector<Work> works;
    const int tag = 7301;
    for (int j = 0; j < N; ++j) {
      if (j == me) continue;
      works.push_back(g.recv(span(recv.data() + static_cast<std::size_t>(j) * block, block), j, tag));
    }
    for (int j = 0; j < N; ++j) {
      if (j == me) continue;
      works.push_back(g.send(span(static_cast<const std::uint8_t*>(send.data()) +
                                      static_cast<std::size_t>(j) * block, block), j, tag));
    }
    std::copy_n(send.data() + static_cast<std::size_t>(me) * block, block,
                recv.data() + static_cast<std::size_t>(me) * block);
    works.push_back(g.all_gather(span(static_cast<const float*>(scales.data()), T),
                                 span(all_scales.data(), n_ranks * T)));
    for (Work& w : works) w.wait();
  }
  // ---- server: average this rank's chunk of every tensor, add the server error, compress ----
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(N));
  std::vector<std::uint8_t> server(block), all_server(n_ranks * block);
  std::vector<float> server_scales(T), all_server_scales(n_ranks * T);
  for (std::size_t t = 0; t < T; ++t) {
    const std::size_t c = chunk[t];
    buf.assign(c, 0.0f);
    for (std::size_t i = 0; i < n_ranks; ++i) {
      const float s = all_scales[i * T + t] * inv_n;
      const std::uint8_t* b = recv.data() + i * block + at[t];
      for (std::size_t k = 0; k < c; ++k) buf[k] = buf[k] + sign_of(b, k) * s;
    }
    float* serr = tensors[t].server_error;
    for (std::size_t k = 0; k < c; ++k) buf[k] = buf[k] + serr[k];
    server_scales[t] = compress(buf.data(), c, serr, server.data() + at[t]);
  }
  // ---- exchange 2: every rank's chunks and their scales to all ----
  {
    Work a = g.all_gather(span(static_cast<const std::uint8_t*>(server.data()), block),
                          span(all_server.data(), n_ranks * block));
    Work b = g.all_gather(span(static_cast<const float*>(server_scales.data()), T),
                          span(all_server_scales.data(), n_ranks * T));
    a.wait();
    b.wait();
  }
  // ---- every rank: the tensor is the chunks' sign × scale ----
  for (std::size_t t = 0; t < T; ++t) {
    const optim::ErrorFeedbackTensor& x = tensors[t];
    for (std::size_t i = 0; i < x.n; ++i) {
      const std::size_t j = i / chunk[t], k = i % chunk[t];
      x.data[i] = sign_of(all_server.data() + j * block + at[t], k) * all_server_scales[j * T + t];
    }
  }
}

}  // namespace strata::parallel
