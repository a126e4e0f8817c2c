// The safetensors file format (Hugging Face); the header's JSON through nlohmann/json.
//
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  JSON header, padded with spaces so the data starts at a multiple of 8:
//              {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//               "__metadata__": {"key": "value", ...}}          (metadata optional, strings only)
//   [rest]     the tensors' raw little-endian bytes, row-major; offsets count from the data start
//
// Dtypes F32, BF16, F16, I32 and U16 map to ternion's DType; a file holding any other dtype is
// refused naming it. Every problem with a file (missing, unreadable, truncated, malformed header,
// offsets out of the file, overlapping or disagreeing with shape x dtype size) is a
// CheckpointError naming the file. Misuse by the caller (an undefined or non-CPU tensor, a name
// given twice) is an InternalError.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"

namespace ternion {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::int64_t begin = 0, end = 0;  // byte offsets in the data section
};

// Writes `tensors` (CPU, any strides: written contiguous) in the order given, and `metadata`,
// to `path`, and fsyncs it. CheckpointError (naming the file and strerror) on any I/O failure,
// including a full disk: every write, the fsync and the close are checked.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// An open safetensors file: the validated header; tensors are read on demand.
class SafetensorsFile {
 public:
  // Reads and validates the header (see the top of this file for what is refused).
  static SafetensorsFile open(const std::string& path);

  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // in file order
  const SafetensorsEntry* find(const std::string& name) const;                // null if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // A fresh contiguous CPU tensor. CheckpointError if absent, or if the read comes up short
  // (the file was truncated after open).
  Tensor read(const std::string& name) const;
  // The tensor's bytes into `out`, which holds exactly its size (else CheckpointError): a read
  // with no buffer of its own, straight into where the values are kept, in chunks that
  // OpenMP's threads share. Returns their CRC-32 (framework/crc32.h), each chunk's taken as
  // it is read, where `checksum` is set; else 0.
  std::uint32_t read_into(const std::string& name, void* out, std::size_t bytes,
                          bool checksum = true) const;
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::int64_t data_start_ = 0;  // 8 + N
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::size_t> index_;  // name -> position in entries_
  std::map<std::string, std::string> metadata_;
};

}  // namespace ternion
