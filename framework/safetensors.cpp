#include "framework/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

#include "framework/crc32.h"
#include "framework/strict_json.h"

namespace ternion {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping here");

namespace {

// The reference implementation refuses headers above 100 MB; a larger length is a corrupt file,
// not a reason to allocate gigabytes.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

std::string errno_text(int err) { return std::strerror(err); }

// ---- JSON (framework/strict_json.h) ------------------------------------------------------------

Json parse_header(const std::string& path, const std::string& text,
                  std::vector<std::string>* names_in_order) {
  std::string why;
  std::optional<Json> root = parse_strict_json(text, &why, names_in_order);
  if (!root) TN_THROW(CheckpointError, "safetensors file '", path, "': invalid JSON header: ", why);
  return std::move(*root);
}

// ---- dtypes ------------------------------------------------------------------------------------

std::string safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I32: return "I32";
    case DType::U16: return "U16";
  }
  return "?";
}

bool dtype_from_name(const std::string& name, DType* out) {
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::U16}) {
    if (safetensors_dtype_name(d) == name) {
      *out = d;
      return true;
    }
  }
  return false;
}

// ---- POSIX file I/O with every call checked -----------------------------------------------------

// Closes the descriptor on scope exit unless release() took it (the write path closes it itself
// so that a failing close is reported).
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void write_all(int fd, const std::string& path, const char* data, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd, data, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      TN_THROW(CheckpointError, "cannot write safetensors file '", path, "': ", errno_text(errno));
    }
    if (n == 0)
      TN_THROW(CheckpointError, "cannot write safetensors file '", path, "': no progress");
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

// Reads exactly `bytes` at `offset`; returns how many bytes it got before the end of the file.
std::size_t read_at(int fd, const std::string& path, char* data, std::size_t bytes,
                    std::int64_t offset) {
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::pread(fd, data + got, bytes - got, static_cast<off_t>(offset) +
                                                               static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      TN_THROW(CheckpointError, "cannot read safetensors file '", path, "': ", errno_text(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

FileDescriptor open_for_reading(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    TN_THROW(CheckpointError, "cannot open safetensors file '", path, "': ", errno_text(errno));
  return FileDescriptor(fd);
}

// ---- header validation -------------------------------------------------------------------------

// A non-negative integer that fits in int64 (written without a fraction or an exponent).
bool to_count(const Json& v, std::int64_t* out) {
  if (!v.is_number_unsigned()) return false;
  const auto value = v.get<std::uint64_t>();
  if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
  *out = static_cast<std::int64_t>(value);
  return true;
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const Json& v) {
  auto bad = [&](const std::string& what) {
    TN_THROW(CheckpointError, "safetensors file '", path, "': tensor '", name, "': ", what);
  };
  if (!v.is_object()) bad("entry is not an object");
  const Json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (const auto& [key, value] : v.items()) {
    if (key == "dtype") dtype = &value;
    else if (key == "shape") shape = &value;
    else if (key == "data_offsets") offsets = &value;
    else bad("unknown field '" + key + "'");
  }
  if (dtype == nullptr || shape == nullptr || offsets == nullptr)
    bad("needs \"dtype\", \"shape\" and \"data_offsets\"");

  SafetensorsEntry e;
  e.name = name;
  if (!dtype->is_string()) bad("dtype is not a string");
  const std::string& dtype_name = dtype->get_ref<const std::string&>();
  if (!dtype_from_name(dtype_name, &e.dtype))
    bad("unsupported dtype '" + dtype_name + "' (supported: F32, BF16, F16, I32, U16)");

  if (!shape->is_array()) bad("shape is not an array");
  // The element count is checked for overflow as it grows: a corrupt shape must not wrap
  // around to a size that happens to match the offsets.
  std::int64_t numel = 1;
  bool overflow = false;
  for (const Json& extent : *shape) {
    std::int64_t n = 0;
    if (!to_count(extent, &n)) bad("shape holds something other than non-negative integers");
    e.shape.push_back(n);
    if (n != 0 && numel > std::numeric_limits<std::int64_t>::max() / n) overflow = true;
    else numel *= n;
  }
  if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) numel = 0, overflow = false;
  const auto elem = static_cast<std::int64_t>(dtype_size(e.dtype));
  if (overflow || numel > std::numeric_limits<std::int64_t>::max() / elem)
    bad("shape " + shape_str(e.shape) + " is too large");

  if (!offsets->is_array() || offsets->size() != 2 || !to_count((*offsets)[0], &e.begin) ||
      !to_count((*offsets)[1], &e.end))
    bad("data_offsets is not two non-negative integers");
  if (e.end < e.begin) bad("data_offsets end before they begin");
  if (e.end - e.begin != numel * elem)
    bad("data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ") hold " +
        std::to_string(e.end - e.begin) + " bytes, but " + safetensors_dtype_name(e.dtype) +
        shape_str(e.shape) + " needs " + std::to_string(numel * elem));
  return e;
}

}  // namespace

// ---- writing -----------------------------------------------------------------------------------

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> contiguous;
  contiguous.reserve(tensors.size());
  std::set<std::string> names;
  // In the caller's order, appended without a lookup per name (names are unique, checked).
  OrderedJson root = OrderedJson::object();
  auto& members = root.get_ref<OrderedJson::object_t&>();
  std::int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    TN_CHECK(tensor.defined(), "safetensors tensor '", name, "' is undefined");
    TN_CHECK(tensor.device().is_cpu(), "safetensors tensor '", name, "' is on ",
             tensor.device().str());
    TN_CHECK(name != kMetadataKey, "'", kMetadataKey, "' is reserved for the metadata");
    TN_CHECK(names.insert(name).second, "safetensors tensor '", name, "' given twice");
    contiguous.push_back(tensor.contiguous());
    const auto bytes = static_cast<std::int64_t>(tensor.nbytes());
    members.push_back({name, {{"dtype", safetensors_dtype_name(tensor.dtype())},
                              {"shape", tensor.shape()},
                              {"data_offsets", {offset, offset + bytes}}}});
    offset += bytes;
  }
  if (!metadata.empty()) members.push_back({kMetadataKey, metadata});
  std::string header;
  try {
    header = root.dump();
  } catch (const OrderedJson::type_error& e) {
    TN_CHECK(false, "safetensors file '", path, "': a tensor name or metadata is not UTF-8 (",
             e.what(), ")");
  }
  // Pad so the data section starts 8-byte aligned (8 + N is a multiple of 8): a reader that
  // maps the file can then use the tensors in place.
  header.append((8 - header.size() % 8) % 8, ' ');

  char length[8];
  std::uint64_t n = header.size();
  for (char& byte : length) {
    byte = static_cast<char>(n & 0xFFu);
    n >>= 8;
  }

  const int raw_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (raw_fd < 0)
    TN_THROW(CheckpointError, "cannot create safetensors file '", path, "': ", errno_text(errno));
  FileDescriptor fd(raw_fd);
  write_all(fd.get(), path, length, sizeof length);
  write_all(fd.get(), path, header.data(), header.size());
  for (const Tensor& t : contiguous)
    if (t.nbytes() > 0)
      write_all(fd.get(), path, static_cast<const char*>(t.raw_data()), t.nbytes());
  // A full disk or a failing device may only show at fsync or close (delayed allocation,
  // network file systems), so both are errors too.
  if (::fsync(fd.get()) != 0)
    TN_THROW(CheckpointError, "cannot sync safetensors file '", path, "': ", errno_text(errno));
  if (::close(fd.release()) != 0)
    TN_THROW(CheckpointError, "cannot close safetensors file '", path, "': ", errno_text(errno));
}

// ---- reading -----------------------------------------------------------------------------------

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  FileDescriptor fd = open_for_reading(path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    TN_THROW(CheckpointError, "cannot stat safetensors file '", path, "': ", errno_text(errno));
  if (!S_ISREG(st.st_mode))
    TN_THROW(CheckpointError, "safetensors file '", path, "' is not a regular file");
  const auto file_bytes = static_cast<std::uint64_t>(st.st_size);

  unsigned char length[8];
  if (read_at(fd.get(), path, reinterpret_cast<char*>(length), sizeof length, 0) != sizeof length)
    TN_THROW(CheckpointError, "safetensors file '", path, "' is ", file_bytes,
             " bytes, too short for the 8-byte header length");
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | length[i];
  if (header_bytes > kMaxHeaderBytes || header_bytes > file_bytes - 8)
    TN_THROW(CheckpointError, "safetensors file '", path, "': header length ", header_bytes,
             " is larger than the file (", file_bytes, " bytes)");

  std::string header(header_bytes, '\0');
  if (read_at(fd.get(), path, header.data(), header.size(), 8) != header.size())
    TN_THROW(CheckpointError, "safetensors file '", path, "': header cut short");
  std::vector<std::string> names;  // the header's keys in file order
  const Json root = parse_header(path, header, &names);
  if (!root.is_object())
    TN_THROW(CheckpointError, "safetensors file '", path, "': header is not a JSON object");

  SafetensorsFile file;
  file.path_ = path;
  file.data_start_ = static_cast<std::int64_t>(8 + header_bytes);
  const std::int64_t data_bytes = static_cast<std::int64_t>(file_bytes - 8 - header_bytes);
  for (const std::string& name : names) {
    const Json& value = root.at(name);
    if (name == kMetadataKey) {
      if (!value.is_object())
        TN_THROW(CheckpointError, "safetensors file '", path, "': __metadata__ is not an object");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string())
          TN_THROW(CheckpointError, "safetensors file '", path, "': metadata '", key,
                   "' is not a string");
        file.metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    SafetensorsEntry e = parse_entry(path, name, value);
    if (e.end > data_bytes)
      TN_THROW(CheckpointError, "safetensors file '", path, "': tensor '", name,
               "' ends at data byte ", e.end, " but the file holds only ", data_bytes,
               " data bytes (truncated?)");
    file.index_[name] = file.entries_.size();
    file.entries_.push_back(std::move(e));
  }

  // Overlap: sorted by start, every tensor must begin at or after the previous one's end (empty
  // tensors occupy no bytes and overlap nothing).
  std::vector<const SafetensorsEntry*> by_offset;
  for (const SafetensorsEntry& e : file.entries_)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      TN_THROW(CheckpointError, "safetensors file '", path, "': tensors '", by_offset[i - 1]->name,
               "' [", by_offset[i - 1]->begin, ", ", by_offset[i - 1]->end, ") and '",
               by_offset[i]->name, "' [", by_offset[i]->begin, ", ", by_offset[i]->end,
               ") overlap");
  return file;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Tensor SafetensorsFile::read(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr)
    TN_THROW(CheckpointError, "safetensors file '", path_, "' has no tensor '", name, "'");
  Tensor t = Tensor::empty(e->shape, e->dtype);
  read_into(name, t.raw_data(), t.nbytes(), /*checksum=*/false);
  return t;
}

std::uint32_t SafetensorsFile::read_into(const std::string& name, void* out, std::size_t bytes,
                                         bool checksum) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr)
    TN_THROW(CheckpointError, "safetensors file '", path_, "' has no tensor '", name, "'");
  const auto held = static_cast<std::size_t>(e->end - e->begin);
  TN_CHECK_AS(CheckpointError, held == bytes, "safetensors file '", path_, "': tensor '", name,
              "' holds ", held, " bytes, not the ", bytes, " expected");
  if (bytes == 0) return 0;
  FileDescriptor fd = open_for_reading(path_);
  char* data = static_cast<char*>(out);
  return crc32_by_chunks(bytes, [&](std::size_t begin, std::size_t length) {
    const std::size_t got =
        read_at(fd.get(), path_, data + begin, length, data_start_ + e->begin + begin);
    if (got != length)
      TN_THROW(CheckpointError, "safetensors file '", path_, "': tensor '", name,
               "' cut short: read ", begin + got, " of ", bytes, " bytes (the file was truncated)");
    return checksum ? crc32(data + begin, length) : 0u;
  });
}

}  // namespace ternion
