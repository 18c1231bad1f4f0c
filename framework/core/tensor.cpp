#include "framework/core/tensor.hpp"

#include <cstring>

#include <fmt/ranges.h>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/stream.hpp"
#include "framework/core/convert.hpp"
#include "framework/core/meta_device.hpp"

namespace strata {

namespace {

// Shape admits -1 (an extent for view() to infer); a tensor's own shape must be fully known.
void check_known_extents(const Shape& s) {
  for (auto d : s.dims())
    STRATA_CHECK(d >= 0, "core", "tensor shape {} has an unresolved -1 extent", s.str());
}

MemoryLedger& ledger_of(const TensorOptions& o) {
  return o.ledger ? *o.ledger : MemoryLedger::global();
}

// Calls f(src_element_offset, dst_element_offset) for every element in row-major order.
template <typename F>
void for_each_index(const Shape& shape, const std::vector<std::int64_t>& sa, std::int64_t oa,
                    const std::vector<std::int64_t>& sb, std::int64_t ob, F&& f) {
  const std::size_t r = shape.rank();
  const std::int64_t n = shape.numel();
  if (n == 0) return;
  std::vector<std::int64_t> idx(r, 0);
  std::int64_t a = oa, b = ob;
  for (std::int64_t k = 0; k < n; ++k) {
    f(a, b);
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        a += sa[d];
        b += sb[d];
        break;
      }
      a -= sa[d] * (shape[d] - 1);
      b -= sb[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape,
               std::vector<std::int64_t> strides, std::int64_t offset)
    : storage_(std::move(storage)), dtype_(dtype), shape_(std::move(shape)),
      strides_(std::move(strides)), offset_(offset) {
  STRATA_CHECK(strides_.size() == shape_.rank(), "core", "{} strides for shape {}",
               strides_.size(), shape_.str());
  check_known_extents(shape_);
  // Every element the view can address must lie inside the storage.
  STRATA_CHECK(offset_ >= 0, "core", "negative offset {} for a view {}", offset_, shape_.str());
  if (storage_ && shape_.numel() > 0) {
    std::int64_t lo = offset_, hi = offset_;
    for (std::size_t d = 0; d < shape_.rank(); ++d) {
      const std::int64_t span = (shape_[d] - 1) * strides_[d];
      (span < 0 ? lo : hi) += span;
    }
    const auto es = static_cast<std::int64_t>(dtype_size(dtype_));
    STRATA_CHECK(lo >= 0 && (hi + 1) * es <= static_cast<std::int64_t>(storage_->bytes()), "core",
                 "view {} (strides [{}], offset {}) reaches elements [{}, {}] outside a storage "
                 "of {} {} elements",
                 shape_.str(), fmt::join(strides_, ", "), offset_, lo, hi,
                 storage_->bytes() / static_cast<std::size_t>(es), dtype_name(dtype_));
  }
}

Tensor Tensor::empty(const Shape& shape, DType dtype, const TensorOptions& o) {
  check_known_extents(shape);
  auto st = Storage::allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype),
                              o.device, o.tier, o.category, ledger_of(o), o.pinned);
  return Tensor(std::move(st), dtype, shape, shape.contiguous_strides(), 0);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, const TensorOptions& o) {
  Tensor t = empty(shape, dtype, o);
  t.zero();
  return t;
}

bool Tensor::is_contiguous() const {
  std::int64_t acc = 1;
  for (std::size_t i = shape_.rank(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != acc) return false;
    acc *= shape_[i];
  }
  return true;
}

void* Tensor::raw() const {
  STRATA_CHECK(storage_, "core", "access to an undefined tensor");
  if (!storage_->data()) return nullptr;  // meta: no memory behind it
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
}

Tensor Tensor::view(const Shape& s) const {
  STRATA_CHECK(is_contiguous(), "core", "view of a non-contiguous tensor {}", shape_.str());
  std::vector<std::int64_t> d = s.dims();
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] == -1) {
      STRATA_CHECK(infer < 0, "core", "more than one -1 in view shape");
      infer = static_cast<int>(i);
    } else {
      known *= d[i];
    }
  }
  if (infer >= 0) {
    STRATA_CHECK(known > 0 && numel() % known == 0, "core", "cannot view {} as {}", shape_.str(),
                 s.str());
    d[infer] = numel() / known;
  }
  Shape ns(d);
  STRATA_CHECK(ns.numel() == numel(), "core", "cannot view {} ({} elements) as {}", shape_.str(),
               numel(), ns.str());
  return Tensor(storage_, dtype_, ns, ns.contiguous_strides(), offset_);
}

Tensor Tensor::slice(int dim, std::int64_t start, std::int64_t end) const {
  const int r = static_cast<int>(rank());
  const int d = dim < 0 ? dim + r : dim;
  STRATA_CHECK(d >= 0 && d < r, "core", "slice dim {} of rank-{} tensor", dim, r);
  STRATA_CHECK(0 <= start && start <= end && end <= shape_[d], "core",
               "slice [{}, {}) out of range for extent {} of {}", start, end, shape_[d], shape_.str());
  Shape s = shape_;
  s[d] = end - start;
  return Tensor(storage_, dtype_, s, strides_, offset_ + start * strides_[d]);
}

Tensor Tensor::select(std::int64_t i) const {
  STRATA_CHECK(rank() >= 1 && 0 <= i && i < shape_[0], "core", "select {} of {}", i, shape_.str());
  std::vector<std::int64_t> d(shape_.dims().begin() + 1, shape_.dims().end());
  std::vector<std::int64_t> st(strides_.begin() + 1, strides_.end());
  return Tensor(storage_, dtype_, Shape(d), st, offset_ + i * strides_[0]);
}

Tensor Tensor::transpose(int a, int b) const {
  const int r = static_cast<int>(rank());
  if (a < 0) a += r;
  if (b < 0) b += r;
  STRATA_CHECK(a >= 0 && a < r && b >= 0 && b < r, "core", "transpose({}, {}) of rank {}", a, b, r);
  Shape s = shape_;
  auto st = strides_;
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  return Tensor(storage_, dtype_, s, st, offset_);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  TensorOptions o{device(), tier(), category(), nullptr};
  return clone(o);
}

Tensor Tensor::clone(const TensorOptions& o) const { return to(dtype_, o); }

Tensor Tensor::to(DType dt, const TensorOptions& o) const {
  Tensor t = empty(shape_, dt, o);
  // A plan for a GPU (meta_cuda(): meta_device.hpp) takes the same path, on the meta device.
  const bool src_gpu = device().is_cuda() || is_meta_cuda(device());
  const bool gpu = src_gpu || o.device.is_cuda() || is_meta_cuda(o.device);
  if (gpu && defined() && (dt != dtype_ || !is_contiguous())) {
    // Converted (or made contiguous) on the host: a copy between devices moves bytes only.
    STRATA_CHECK(!device().is_cuda() || is_contiguous(), "core",
                 "a copy of a non-contiguous tensor {} on {} is not supported", shape_.str(),
                 device().str());
    const bool meta = device().is_meta() || o.device.is_meta();
    const TensorOptions host{meta ? Device::meta() : Device::cpu(), Tier::host,
                             Category::workspace, o.ledger};
    const Tensor h = src_gpu ? clone(host) : *this;
    t.copy_from(h.to(dt, host));
    return t;
  }
  t.copy_from(*this);
  return t;
}

namespace {
cuda::CopyKind copy_kind(bool src_on_gpu, bool dst_on_gpu) {
  return src_on_gpu && dst_on_gpu ? cuda::CopyKind::device_to_device
         : src_on_gpu             ? cuda::CopyKind::device_to_host
                                  : cuda::CopyKind::host_to_device;
}

// The stream a copy between a and b is ordered on: the current stream of the GPU involved (the
// destination's when both are), so it runs after the kernels queued there that wrote the source.
Stream copy_stream(const Tensor& src, const Tensor& dst) {
  return current_stream(dst.device().is_cuda() ? dst.device() : src.device());
}
}  // namespace

void Tensor::copy_from(const Tensor& src) {
  STRATA_CHECK(src.shape_ == shape_, "core", "copy of {} into {}", src.shape_.str(), shape_.str());
  if (numel() == 0) return;
  // No data to move on the meta device; a plan for a GPU (meta_cuda(): meta_device.hpp) is still
  // charged the host workspace of a converting copy, as the GPU's copy below takes it.
  const bool meta = src.device().is_meta() || device().is_meta();
  const bool sc = src.device().is_cuda() || is_meta_cuda(src.device()),
             dc = device().is_cuda() || is_meta_cuda(device());
  const bool staged =
      (sc || dc) && (src.dtype_ != dtype_ || !src.is_contiguous() || !is_contiguous());
  if (meta && !staged) return;
  if (staged) {
    // Converted (or rearranged) in host memory: the GPU's side moves its bytes as they are
    // (an optimizer state's f32 master made from 16-bit parameters on the GPU, at set-up).
    STRATA_CHECK((!sc || src.is_contiguous()) && (!dc || is_contiguous()), "core",
                 "a copy between {} and {} of a non-contiguous tensor on the GPU ({} {} into {} {})",
                 src.device().str(), device().str(), dtype_name(src.dtype_), src.shape_.str(),
                 dtype_name(dtype_), shape_.str());
    MemoryLedger* ledger = storage_->ledger() ? storage_->ledger() : src.storage_->ledger();
    const TensorOptions host{meta ? Device::meta() : Device::cpu(), Tier::host, Category::workspace,
                             ledger};
    const Tensor s = sc ? src.clone(host) : src;
    if (!dc) {
      copy_from(s);
      return;
    }
    Tensor d = Tensor::empty(shape_, dtype_, host);
    d.copy_from(s);
    copy_from(d);
    return;
  }
  if (sc || dc) {
    STRATA_CHECK(!(sc && dc) || src.device() == device(), "core",
                 "a copy from {} to {} between two GPUs is not supported: stage it through the "
                 "host", src.device().str(), device().str());
    // Ordered after the work queued on the GPU's current stream (which wrote the source or still
    // reads the destination), and complete when this returns: the host may read or reuse its
    // side at once.
    const Stream s = copy_stream(src, *this);
    cuda::memcpy_async(raw(), src.raw(), nbytes(), copy_kind(sc, dc), s.handle());
    s.synchronize();
    return;
  }
  if (src.is_contiguous() && is_contiguous()) {
    convert(src.raw(), src.dtype_, raw(), dtype_, static_cast<std::size_t>(numel()));
    return;
  }
  const std::size_t ss = dtype_size(src.dtype_), ds = dtype_size(dtype_);
  const char* sb = static_cast<const char*>(src.storage_->data());
  char* db = static_cast<char*>(storage_->data());
  for_each_index(shape_, src.strides_, src.offset_, strides_, offset_,
                 [&](std::int64_t a, std::int64_t b) {
                   convert(sb + a * ss, src.dtype_, db + b * ds, dtype_, 1);
                 });
}

void Tensor::fill(double v) {
  STRATA_CHECK(defined(), "core", "fill of an undefined tensor");
  if (device().is_meta()) return;
  const std::size_t es = dtype_size(dtype_);
  alignas(8) unsigned char one[8];
  convert(&v, DType::f64, one, dtype_, 1);
  if (device().is_cuda()) {
    STRATA_CHECK(is_contiguous(), "core", "fill of a non-contiguous tensor {} on {}", shape_.str(),
                 device().str());
    if (numel() == 0) return;
    cuda::fill_async(raw(), one, es, static_cast<std::size_t>(numel()),
                     current_stream(device()).handle());
    return;
  }
  char* db = static_cast<char*>(storage_->data());
  if (is_contiguous()) {
    char* p = static_cast<char*>(raw());
    const std::int64_t n = numel();
    if (dtype_ == DType::f32) {
      float f;
      std::memcpy(&f, one, 4);
      std::fill_n(reinterpret_cast<float*>(p), n, f);
    } else {
      for (std::int64_t i = 0; i < n; ++i) std::memcpy(p + i * es, one, es);
    }
    return;
  }
  for_each_index(shape_, strides_, offset_, strides_, offset_,
                 [&](std::int64_t, std::int64_t b) { std::memcpy(db + b * es, one, es); });
}

void Tensor::zero() {
  if (device().is_meta()) return;
  if (is_contiguous() && device().is_cpu()) {
    std::memset(raw(), 0, nbytes());
    return;
  }
  if (is_contiguous() && device().is_cuda()) {
    // Queued on the device's current stream (the host does not wait).
    if (numel() > 0) cuda::memset_async(raw(), 0, nbytes(), current_stream(device()).handle());
    return;
  }
  fill(0.0);
}

double Tensor::item(std::int64_t k) const {
  STRATA_CHECK(defined(), "core", "item() of an undefined tensor");
  if (device().is_cuda()) return clone(TensorOptions{Device::cpu(), Tier::host}).item(k);
  STRATA_CHECK(device().is_cpu(), "core", "item() on {}", device().str());
  STRATA_CHECK(0 <= k && k < numel(), "core", "item {} of {} elements", k, numel());
  // Walk to the k-th element in row-major order.
  std::int64_t off = offset_;
  for (std::size_t d = rank(); d-- > 0;) {
    off += (k % shape_[d]) * strides_[d];
    k /= shape_[d];
  }
  double v = 0;
  convert(static_cast<const char*>(storage_->data()) + off * dtype_size(dtype_), dtype_, &v,
          DType::f64, 1);
  return v;
}

std::vector<float> Tensor::to_vector() const {
  if (device().is_cuda()) return clone(TensorOptions{Device::cpu(), Tier::host}).to_vector();
  STRATA_CHECK(device().is_cpu(), "core", "to_vector() on {}", device().str());
  std::vector<float> out(static_cast<std::size_t>(numel()));
  Tensor c = contiguous();
  convert(c.raw(), dtype_, out.data(), DType::f32, out.size());
  return out;
}

}  // namespace strata
