// Tensor: a typed, shaped, strided view into reference-counted Storage.
//
// Views (`view`, `slice`, `select`) share storage and never copy; `contiguous()` and `clone()`
// copy. Kernels take contiguous tensors (they check); slices along dimension 0 of a contiguous
// tensor stay contiguous, slices along later dimensions are strided views that `copy_from` and
// `contiguous()` understand. Tensor-parallel shards are made exactly that way: the full
// parameter's `slice(dim, rank * n, n)`.
//
// Tensors live on the CPU or on the process's CUDA device (Device::cuda(i), once
// init_cuda_device has run). `copy_from`, `clone`, `contiguous`, `to`, `fill`, `zero` and
// `to_vector` work on both; device work runs on the compute stream, and a copy that reads or
// writes host memory waits for it, so host code may use the host tensor as soon as it returns.
// A CPU-only build throws CudaError ("this build has no CUDA") for anything on a CUDA device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "framework/allocator.h"
#include "framework/device.h"
#include "framework/dtype.h"
#include "framework/error.h"

namespace ternion {

using Shape = std::vector<std::int64_t>;

std::int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

// An owned block of memory on one device, freed through the allocator that made it.
class Storage {
 public:
  Storage(std::size_t bytes, Device device);
  // Wraps memory owned elsewhere (a memory-mapped file, say); `keep_alive` holds its owner.
  Storage(void* data, std::size_t bytes, Device device, std::shared_ptr<void> keep_alive);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;  // null for wrapped memory
  std::shared_ptr<void> keep_alive_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: holds no storage

  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, float value, Device device = Device::cpu());
  // A tensor over existing memory; `keep_alive` owns it.
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device,
                     std::shared_ptr<void> keep_alive);
  // A tensor on the meta device: a shape and no memory (framework/device.h), what a dry run
  // builds a model of to count what each rank would hold (framework/parameter.h:
  // ShapeOnlyParameters). Its data cannot be read.
  static Tensor shape_only(const Shape& shape, DType dtype = DType::F32);
  // A CPU f32 tensor holding `values` (for tests and small constants).
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);

  bool defined() const { return storage_ != nullptr; }
  bool has_data() const { return defined() && (storage_->data() != nullptr || nbytes() == 0); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  std::int64_t dim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t size(std::int64_t dim) const;  // negative dims count from the end
  std::int64_t numel() const { return shape_numel(shape_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  bool is_contiguous() const;
  std::string str() const;  // "f32[4, 64, 768] cpu"

  // Typed element pointer (checks the dtype). Elements are at data<T>()[i * strides()[d]...].
  template <class T>
  T* data() const {
    TN_CHECK(dtype_ == dtype_of<T>(), "tensor is ", dtype_name(dtype_), ", not ",
             dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  // Views sharing storage.
  Tensor view(const Shape& shape) const;                        // contiguous only; one -1 allowed
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;   // slice of length 1, dim removed

  // Copies.
  Tensor contiguous() const;  // itself if already contiguous
  Tensor clone() const;
  void copy_from(const Tensor& src);  // same shape and dtype; any strides; any two devices
  // A contiguous tensor on `device`: a copy when the devices differ; on the same device it is
  // `contiguous()` (so itself, sharing storage, when already contiguous).
  Tensor to(Device device) const;
  void fill(float value);  // F32, contiguous
  void zero();             // contiguous

  // Elements in row-major order as floats (copies; from the device if need be). F32 or BF16.
  // A meta tensor's are zeros.
  std::vector<float> to_vector() const;
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }
  // Whether both start at the same element of the same storage (kernels refuse some such
  // aliases); unlike comparing data pointers, it also answers for meta tensors.
  bool same_start_as(const Tensor& other) const {
    return storage_ == other.storage_ && offset_ == other.offset_;
  }
  // The storage, without keeping it alive: says whether a tensor seen earlier is still this one.
  std::weak_ptr<const Storage> weak_storage() const { return storage_; }
  std::int64_t storage_offset() const { return offset_; }  // in elements

 private:
  std::shared_ptr<Storage> storage_;
  std::int64_t offset_ = 0;  // in elements
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::F32;
};

Shape contiguous_strides(const Shape& shape);

}  // namespace ternion
