#include "framework/tensor.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <sstream>

#include "framework/bfloat16.h"
#include "framework/features.h"
#include "framework/op_cost.h"

#if TN_HAVE_CUDA
#include "framework/cuda/cuda_runtime.h"
#endif

namespace ternion {

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t extent : shape) n *= extent;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

Storage::Storage(std::size_t bytes, Device device)
    : bytes_(bytes), device_(device), allocator_(&allocator_for(device)) {
  data_ = allocator_->allocate(bytes);
}

Storage::Storage(void* data, std::size_t bytes, Device device, std::shared_ptr<void> keep_alive)
    : data_(data), bytes_(bytes), device_(device), keep_alive_(std::move(keep_alive)) {}

Storage::~Storage() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, bytes_);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (std::int64_t extent : shape) TN_CHECK(extent >= 0, "negative extent in ", shape_str(shape));
  Tensor t;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  try {
    t.storage_ = std::make_shared<Storage>(bytes, device);
  } catch (const std::bad_alloc&) {
    TN_THROW(MemoryError, "out of memory: ", bytes, " bytes for a ", dtype_name(dtype),
             " tensor of shape ", shape_str(shape), " on ", device.str());
  }
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero();
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device device) {
  Tensor t = empty(shape, DType::F32, device);
  t.fill(value);
  return t;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device device,
                    std::shared_ptr<void> keep_alive) {
  Tensor t;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(
      data, static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype), device,
      std::move(keep_alive));
  return t;
}

Tensor Tensor::shape_only(const Shape& shape, DType dtype) {
  return empty(shape, dtype, Device::meta());
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  TN_CHECK(static_cast<std::int64_t>(values.size()) == shape_numel(shape), values.size(),
           " values for shape ", shape_str(shape));
  Tensor t = empty(shape);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(float));
  return t;
}

std::int64_t Tensor::size(std::int64_t d) const {
  if (d < 0) d += dim();
  TN_CHECK(d >= 0 && d < dim(), "dimension ", d, " out of range for ", str());
  return shape_[static_cast<std::size_t>(d)];
}

bool Tensor::is_contiguous() const {
  // Row-major without gaps; a dimension of extent 1 may have any stride (nothing steps it).
  std::int64_t expected = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (shape_[i] == 0) return true;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined tensor";
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " " + device().str();
}

void* Tensor::raw_data() const {
  TN_CHECK(defined(), "access to an undefined tensor");
  TN_CHECK(has_data(), "access to the data of a shape-only tensor ", str());
  return static_cast<char*>(storage_->data()) +
         static_cast<std::size_t>(offset_) * dtype_size(dtype_);
}

Tensor Tensor::view(const Shape& shape) const {
  TN_CHECK(is_contiguous(), "view of a non-contiguous tensor ", str());
  Shape resolved = shape;
  std::int64_t known = 1;
  int inferred = -1;
  for (std::size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      TN_CHECK(inferred < 0, "more than one -1 in view ", shape_str(shape));
      inferred = static_cast<int>(i);
    } else {
      known *= resolved[i];
    }
  }
  if (inferred >= 0) {
    TN_CHECK(known > 0 && numel() % known == 0, "cannot view ", str(), " as ", shape_str(shape));
    resolved[static_cast<std::size_t>(inferred)] = numel() / known;
  }
  TN_CHECK(shape_numel(resolved) == numel(), "cannot view ", str(), " as ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = resolved;
  t.strides_ = contiguous_strides(resolved);
  return t;
}

Tensor Tensor::slice(std::int64_t d, std::int64_t start, std::int64_t length) const {
  if (d < 0) d += dim();
  TN_CHECK(d >= 0 && d < dim(), "slice dimension ", d, " out of range for ", str());
  auto index = static_cast<std::size_t>(d);
  TN_CHECK(start >= 0 && length >= 0 && start + length <= shape_[index], "slice [", start, ", ",
           start + length, ") of dimension ", d, " out of range for ", str());
  Tensor t = *this;
  t.offset_ += start * strides_[index];
  t.shape_[index] = length;
  return t;
}

Tensor Tensor::select(std::int64_t d, std::int64_t index) const {
  if (d < 0) d += dim();
  Tensor t = slice(d, index, 1);
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  t.copy_from(*this);
  return t;
}

namespace {
// Copies a strided block element by element, recursing over dimensions; the innermost
// dimension is copied with memcpy when both sides are unit-stride there.
void copy_strided(char* dst, const Shape& dst_strides, const char* src, const Shape& src_strides,
                  const Shape& shape, std::size_t d, std::size_t elem) {
  if (d + 1 == shape.size()) {
    if (dst_strides[d] == 1 && src_strides[d] == 1) {
      std::memcpy(dst, src, static_cast<std::size_t>(shape[d]) * elem);
      return;
    }
    for (std::int64_t i = 0; i < shape[d]; ++i)
      std::memcpy(dst + i * dst_strides[d] * elem, src + i * src_strides[d] * elem, elem);
    return;
  }
  for (std::int64_t i = 0; i < shape[d]; ++i)
    copy_strided(dst + i * dst_strides[d] * elem, dst_strides, src + i * src_strides[d] * elem,
                 src_strides, shape, d + 1, elem);
}
}  // namespace

#if TN_HAVE_CUDA
namespace {
// The process has one CUDA device; storage labelled with another index would be a bug.
void check_process_device(Device device) {
  TN_CHECK_AS(CudaError, device.index == cuda::current_device(), device.str(),
              ": this process is bound to cuda:", cuda::current_device());
}

// dst <- src where both are on the device, any strides.
void copy_on_device(const Tensor& dst, const Tensor& src) {
  const std::size_t elem = dtype_size(dst.dtype());
  if (dst.is_contiguous() && src.is_contiguous()) {
    cuda::copy_bytes(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice);
    return;
  }
  // std::int64_t is `long` here, not `long long`: copy rather than alias.
  const std::vector<long long> shape(dst.shape().begin(), dst.shape().end());
  const std::vector<long long> dst_strides(dst.strides().begin(), dst.strides().end());
  const std::vector<long long> src_strides(src.strides().begin(), src.strides().end());
  cuda::copy_strided(dst.raw_data(), dst_strides.data(), src.raw_data(), src_strides.data(),
                     shape.data(), static_cast<int>(shape.size()), elem);
}
}  // namespace
#endif

namespace {
// Copies involving a CUDA tensor. Out of line so the CPU path of copy_from stays as it was.
void copy_across_devices(Tensor& dst, const Tensor& src) {
#if TN_HAVE_CUDA
  const Device dst_device = dst.device(), src_device = src.device();
  if (!dst_device.is_cpu()) check_process_device(dst_device);
  if (!src_device.is_cpu()) check_process_device(src_device);
  if (!dst_device.is_cpu() && !src_device.is_cpu()) {
    // cudaMemcpy and the strided kernel do not allow overlap (memmove's job on the CPU): copy
    // from a private clone when the two share storage.
    if (dst.shares_storage_with(src)) {
      copy_on_device(dst, src.clone());
      return;
    }
    copy_on_device(dst, src);
    return;
  }
  if (dst_device.is_cpu()) {  // device -> host
    const Tensor device_src = src.contiguous();
    if (dst.is_contiguous()) {
      cuda::copy_bytes(dst.raw_data(), device_src.raw_data(), dst.nbytes(),
                       cudaMemcpyDeviceToHost);
      return;
    }
    Tensor host = Tensor::empty(dst.shape(), dst.dtype(), Device::cpu());
    cuda::copy_bytes(host.raw_data(), device_src.raw_data(), host.nbytes(), cudaMemcpyDeviceToHost);
    dst.copy_from(host);
    return;
  }
  // host -> device
  const Tensor host_src = src.contiguous();
  if (dst.is_contiguous()) {
    cuda::copy_bytes(dst.raw_data(), host_src.raw_data(), dst.nbytes(), cudaMemcpyHostToDevice);
    return;
  }
  // Staged through a contiguous device temporary. Freeing it right after enqueueing the
  // strided copy is safe: its next user's work is queued behind this copy on the same stream.
  Tensor staging = Tensor::empty(dst.shape(), dst.dtype(), dst_device);
  cuda::copy_bytes(staging.raw_data(), host_src.raw_data(), staging.nbytes(),
                   cudaMemcpyHostToDevice);
  copy_on_device(dst, staging);
#else
  TN_THROW(CudaError, "copy from ", src.str(), " into ", dst.str(),
           ": this build has no CUDA (configure with -DTERNION_CUDA=ON)");
#endif
}
}  // namespace

void Tensor::copy_from(const Tensor& src) {
  TN_CHECK(shape_ == src.shape_ && dtype_ == src.dtype_, "copy from ", src.str(), " into ", str());
  if (device().is_meta() || src.device().is_meta()) {  // nothing to move
    if (device().is_meta()) counted_on_meta({this, &src});
    return;
  }
  if (!device().is_cpu() || !src.device().is_cpu()) {
    if (numel() > 0) copy_across_devices(*this, src);
    return;
  }
  if (numel() == 0) return;
  std::size_t elem = dtype_size(dtype_);
  if (is_contiguous() && src.is_contiguous()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
    return;
  }
  if (shape_.empty()) {
    std::memcpy(raw_data(), src.raw_data(), elem);
    return;
  }
  copy_strided(static_cast<char*>(raw_data()), strides_, static_cast<const char*>(src.raw_data()),
               src.strides_, shape_, 0, elem);
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return contiguous();
  Tensor t = empty(shape_, dtype_, target);
  t.copy_from(*this);
  return t;
}

void Tensor::fill(float value) {
  TN_CHECK(dtype_ == DType::F32 && is_contiguous(), "fill of ", str());
  if (counted_on_meta({this})) return;
  if (!device().is_cpu()) {
#if TN_HAVE_CUDA
    check_process_device(device());
    cuda::fill_f32(data<float>(), value, static_cast<std::size_t>(numel()));
    return;
#else
    TN_THROW(CudaError, "fill of ", str(),
             ": this build has no CUDA (configure with -DTERNION_CUDA=ON)");
#endif
  }
  float* p = data<float>();
  std::int64_t n = numel();
  for (std::int64_t i = 0; i < n; ++i) p[i] = value;
}

void Tensor::zero() {
  TN_CHECK(is_contiguous(), "zero of ", str());
  if (counted_on_meta({this})) return;
  if (!device().is_cpu()) {
#if TN_HAVE_CUDA
    check_process_device(device());
    if (nbytes() > 0) cuda::zero_bytes(raw_data(), nbytes());
    return;
#else
    TN_THROW(CudaError, "zero of ", str(),
             ": this build has no CUDA (configure with -DTERNION_CUDA=ON)");
#endif
  }
  const std::size_t bytes = nbytes();
  char* data = bytes > 0 ? static_cast<char*>(raw_data()) : nullptr;
  // One thread cannot saturate memory bandwidth: zeroing a 124M-parameter model's gradients
  // takes twice as long on one core as on two.
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  const auto chunks = static_cast<std::int64_t>((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 4)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    std::memset(data + begin, 0, std::min(kChunk, bytes - begin));
  }
}

std::vector<float> Tensor::to_vector() const {
  if (device().is_meta()) return std::vector<float>(static_cast<std::size_t>(numel()), 0.0f);
  if (!device().is_cpu()) return to(Device::cpu()).to_vector();
  Tensor c = contiguous();
  if (dtype_ == DType::BF16) {
    const BFloat16* p = c.data<BFloat16>();
    std::vector<float> values(static_cast<std::size_t>(numel()));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = bf16_to_float(p[i]);
    return values;
  }
  const float* p = c.data<float>();
  return std::vector<float>(p, p + numel());
}

}  // namespace ternion
