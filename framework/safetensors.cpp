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

namespace ternion {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping here");

namespace {

// The reference implementation refuses headers above 100 MB; a larger length is a corrupt file,
// not a reason to allocate gigabytes.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

std::string errno_text(int err) { return std::strerror(err); }

// ---- JSON: the subset a header needs, parsed strictly (RFC 8259) -------------------------------

struct JsonMember;

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  std::string text;  // a String's value, or a Number's literal as written
  std::vector<JsonValue> items;     // Array
  std::vector<JsonMember> members;  // Object, in file order
};

// (Not a std::pair: a pair of an incomplete type is ill-formed, and clang's libstdc++ says so.)
struct JsonMember {
  std::string key;
  JsonValue value;
};

class JsonParser {
 public:
  JsonParser(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  JsonValue parse_document() {
    skip_space();
    JsonValue v = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the header object");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void fail(const std::string& what) const {
    TN_THROW(CheckpointError, "safetensors file '", path_, "': invalid JSON header at byte ",
             pos_, ": ", what);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }
  void expect(char c) {
    if (peek() != c || at_end()) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void expect_word(const char* word) {
    const std::size_t n = std::strlen(word);
    if (text_.compare(pos_, n, word) != 0) fail("unexpected character");
    pos_ += n;
  }

  JsonValue parse_value(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    JsonValue v;
    switch (peek()) {
      case '{': parse_object(v, depth); break;
      case '[': parse_array(v, depth); break;
      case '"': v.kind = JsonValue::Kind::String; v.text = parse_string(); break;
      case 't': expect_word("true"); v.kind = JsonValue::Kind::Bool; v.boolean = true; break;
      case 'f': expect_word("false"); v.kind = JsonValue::Kind::Bool; break;
      case 'n': expect_word("null"); break;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) {
          v.kind = JsonValue::Kind::Number;
          v.text = parse_number();
        } else {
          fail(at_end() ? "unexpected end of header" : "unexpected character");
        }
    }
    return v;
  }

  void parse_object(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::Object;
    expect('{');
    skip_space();
    if (peek() == '}') { ++pos_; return; }
    std::set<std::string> seen;
    for (;;) {
      skip_space();
      if (peek() != '"') fail("expected a quoted key");
      std::string key = parse_string();
      if (!seen.insert(key).second) fail("key '" + key + "' appears twice");
      skip_space();
      expect(':');
      skip_space();
      v.members.push_back(JsonMember{std::move(key), parse_value(depth + 1)});
      skip_space();
      if (peek() == ',') { ++pos_; continue; }
      expect('}');
      return;
    }
  }

  void parse_array(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::Array;
    expect('[');
    skip_space();
    if (peek() == ']') { ++pos_; return; }
    for (;;) {
      skip_space();
      v.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') { ++pos_; continue; }
      expect(']');
      return;
    }
  }

  std::string parse_number() {
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (peek() >= '0' && peek() <= '9' && !at_end()) ++pos_;
      if (pos_ == from) fail("malformed number");
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') ++pos_;  // no leading zeros
    else digits();
    if (peek() == '.') { ++pos_; digits(); }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits();
    }
    return text_.substr(start, pos_ - start);
  }

  unsigned parse_hex4() {
    unsigned value = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      const char c = peek();
      value <<= 4;
      if (c >= '0' && c <= '9') value |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') value |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') value |= static_cast<unsigned>(c - 'A' + 10);
      else fail("malformed \\u escape");
    }
    return value;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') { out += c; continue; }
      if (at_end()) fail("unterminated string");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair encodes one code point
            if (text_.compare(pos_, 2, "\\u") != 0) fail("unpaired surrogate");
            pos_ += 2;
            const unsigned low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default: --pos_; fail("unknown escape");
      }
    }
  }

  const std::string& path_;
  const std::string& text_;
  std::size_t pos_ = 0;
};

void append_json_string(std::string& out, const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 0xF];
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
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
    if (n == 0) TN_THROW(CheckpointError, "cannot write safetensors file '", path, "': no progress");
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

// A non-negative integer literal that fits in int64.
bool to_count(const JsonValue& v, std::int64_t* out) {
  if (v.kind != JsonValue::Kind::Number || v.text.empty() || v.text[0] == '-') return false;
  std::int64_t value = 0;
  for (const char c : v.text) {
    if (c < '0' || c > '9') return false;  // fractions and exponents are not counts
    const int digit = c - '0';
    if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name,
                             const JsonValue& v) {
  auto bad = [&](const std::string& what) {
    TN_THROW(CheckpointError, "safetensors file '", path, "': tensor '", name, "': ", what);
  };
  if (v.kind != JsonValue::Kind::Object) bad("entry is not an object");
  const JsonValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (const auto& [key, value] : v.members) {
    if (key == "dtype") dtype = &value;
    else if (key == "shape") shape = &value;
    else if (key == "data_offsets") offsets = &value;
    else bad("unknown field '" + key + "'");
  }
  if (dtype == nullptr || shape == nullptr || offsets == nullptr)
    bad("needs \"dtype\", \"shape\" and \"data_offsets\"");

  SafetensorsEntry e;
  e.name = name;
  if (dtype->kind != JsonValue::Kind::String) bad("dtype is not a string");
  if (!dtype_from_name(dtype->text, &e.dtype))
    bad("unsupported dtype '" + dtype->text + "' (supported: F32, BF16, F16, I32, U16)");

  if (shape->kind != JsonValue::Kind::Array) bad("shape is not an array");
  // The element count is checked for overflow as it grows: a corrupt shape must not wrap
  // around to a size that happens to match the offsets.
  std::int64_t numel = 1;
  bool overflow = false;
  for (const JsonValue& extent : shape->items) {
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

  if (offsets->kind != JsonValue::Kind::Array || offsets->items.size() != 2 ||
      !to_count(offsets->items[0], &e.begin) || !to_count(offsets->items[1], &e.end))
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
  std::string header = "{";
  std::int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    TN_CHECK(tensor.defined(), "safetensors tensor '", name, "' is undefined");
    TN_CHECK(tensor.device().is_cpu(), "safetensors tensor '", name, "' is on ", tensor.device().str());
    TN_CHECK(name != kMetadataKey, "'", kMetadataKey, "' is reserved for the metadata");
    TN_CHECK(names.insert(name).second, "safetensors tensor '", name, "' given twice");
    contiguous.push_back(tensor.contiguous());
    const auto bytes = static_cast<std::int64_t>(tensor.nbytes());
    if (header.size() > 1) header += ',';
    append_json_string(header, name);
    header += ":{\"dtype\":\"" + safetensors_dtype_name(tensor.dtype()) + "\",\"shape\":[";
    for (std::size_t d = 0; d < tensor.shape().size(); ++d) {
      if (d > 0) header += ',';
      header += std::to_string(tensor.shape()[d]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  if (!metadata.empty()) {
    if (header.size() > 1) header += ',';
    append_json_string(header, kMetadataKey);
    header += ":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      first = false;
      append_json_string(header, key);
      header += ':';
      append_json_string(header, value);
    }
    header += '}';
  }
  header += '}';
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
  const JsonValue root = JsonParser(path, header).parse_document();
  if (root.kind != JsonValue::Kind::Object)
    TN_THROW(CheckpointError, "safetensors file '", path, "': header is not a JSON object");

  SafetensorsFile file;
  file.path_ = path;
  file.data_start_ = static_cast<std::int64_t>(8 + header_bytes);
  const std::int64_t data_bytes = static_cast<std::int64_t>(file_bytes - 8 - header_bytes);
  for (const auto& [name, value] : root.members) {
    if (name == kMetadataKey) {
      if (value.kind != JsonValue::Kind::Object)
        TN_THROW(CheckpointError, "safetensors file '", path, "': __metadata__ is not an object");
      for (const auto& [key, text] : value.members) {
        if (text.kind != JsonValue::Kind::String)
          TN_THROW(CheckpointError, "safetensors file '", path, "': metadata '", key,
                   "' is not a string");
        file.metadata_[key] = text.text;
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
  const auto bytes = static_cast<std::size_t>(e->end - e->begin);
  if (bytes == 0) return t;
  FileDescriptor fd = open_for_reading(path_);
  const std::size_t got =
      read_at(fd.get(), path_, static_cast<char*>(t.raw_data()), bytes, data_start_ + e->begin);
  if (got != bytes)
    TN_THROW(CheckpointError, "safetensors file '", path_, "': tensor '", name, "' cut short: read ",
             got, " of ", bytes, " bytes (the file was truncated)");
  return t;
}

}  // namespace ternion
