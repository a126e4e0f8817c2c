// safetensors files: round trips of every dtype and of awkward shapes, the header read back by a
// second, independent reader written here from the format description alone, each kind of bad
// file refused naming the file, and write failures reported. Also the CRC-32 against its
// published check value.
#include "framework/safetensors.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <variant>

#include "framework/crc32.h"
#include "test_util.h"

namespace ternion {
namespace {

// A fresh directory removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ternion-st-XXXXXX").string();
    const char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<unsigned char> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.raw_data(), out.size());
  return out;
}

Tensor random_tensor(const Shape& shape, DType dtype, std::uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  const auto raw = test::random_ints(t.nbytes(), seed, 0, 256);
  auto* p = static_cast<unsigned char*>(t.nbytes() ? t.raw_data() : nullptr);
  for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(raw[i]);
  return t;
}

// Several dtypes and shapes: a 0-d scalar, an empty tensor, and a strided (non-contiguous) slice.
std::vector<std::pair<std::string, Tensor>> sample_tensors() {
  const Tensor wide = random_tensor({4, 6}, DType::F32, 7);
  return {
      {"matrix", random_tensor({3, 5}, DType::F32, 1)},
      {"h.0.bf16", random_tensor({7}, DType::BF16, 2)},
      {"cube.f16", random_tensor({2, 2, 3}, DType::F16, 3)},
      {"ints", random_tensor({4}, DType::I32, 4)},
      {"tokens", random_tensor({9}, DType::U16, 5)},
      {"scalar", random_tensor({}, DType::F32, 6)},
      {"empty", Tensor::empty({0, 4}, DType::F32)},
      {"columns 1..3 of a [4, 6]", wide.slice(1, 1, 3)},
  };
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A file with the given header text (unpadded) and data, and an 8-byte length that is the
// header's own unless `declared_length` says otherwise.
std::string raw_file(const std::string& header, std::size_t data_bytes,
                     std::int64_t declared_length = -1) {
  std::uint64_t n =
      declared_length >= 0 ? static_cast<std::uint64_t>(declared_length) : header.size();
  std::string out;
  for (int i = 0; i < 8; ++i, n >>= 8) out += static_cast<char>(n & 0xFF);
  return out + header + std::string(data_bytes, '\x11');
}

// Opening (and, if that succeeds, reading every tensor) must throw a CheckpointError whose
// message names the file and contains `expected`.
void expect_refused(const std::string& path, const std::string& expected) {
  try {
    const SafetensorsFile f = SafetensorsFile::open(path);
    for (const SafetensorsEntry& e : f.entries()) f.read(e.name);
    ADD_FAILURE() << path << ": accepted, expected an error containing '" << expected << "'";
  } catch (const CheckpointError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos)
        << "message does not name the file: " << message;
    EXPECT_NE(message.find(expected), std::string::npos)
        << "message lacks '" << expected << "': " << message;
  }
}

TEST(Crc32, MatchesTheCheckValueAndChains) {
  const std::string digits = "123456789";
  EXPECT_EQ(crc32(digits.data(), digits.size()), 0xCBF43926u);
  EXPECT_EQ(crc32(nullptr, 0), 0u);
  // Long enough for the eight-byte loop plus a tail, checked against the bitwise definition.
  const auto values = test::random_ints(1003, 11, 0, 256);
  std::vector<unsigned char> data(values.begin(), values.end());
  std::uint32_t bitwise = 0xFFFFFFFFu;
  for (unsigned char b : data) {
    bitwise ^= b;
    for (int k = 0; k < 8; ++k)
      bitwise = (bitwise & 1u) ? (bitwise >> 1) ^ 0xEDB88320u : bitwise >> 1;
  }
  bitwise = ~bitwise;
  EXPECT_EQ(crc32(data.data(), data.size()), bitwise);
  for (std::size_t split : {0, 1, 5, 8, 500, 1003})
    EXPECT_EQ(crc32(data.data() + split, data.size() - split, crc32(data.data(), split)), bitwise)
        << "split at " << split;
}

// Chunks checksummed apart on several threads join into the whole range's CRC, at sizes
// around the chunk's (one chunk, one and a tail, several and a tail).
TEST(Crc32, ChunksOnSeveralThreadsJoinIntoTheWholeCrc) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  const auto values = test::random_ints(3 * kCrcChunk + 7, 5, 0, 256);
  const std::vector<unsigned char> data(values.begin(), values.end());
  for (std::size_t bytes :
       {std::size_t{0}, std::size_t{1000}, kCrcChunk, kCrcChunk + 1, 3 * kCrcChunk + 7})
    EXPECT_EQ(crc32_parallel(data.data(), bytes), crc32(data.data(), bytes)) << bytes;
  omp_set_num_threads(threads);
}

// A tensor of several chunks reads whole, with its CRC; the file cut short in its last chunk
// is said to be, not read as zeros.
TEST(Safetensors, ALargeTensorReadsInChunksWithItsChecksum) {
  ScratchDir dir;
  const std::string path = dir.file("large.safetensors");
  const auto elements = static_cast<std::int64_t>(2 * kCrcChunk / sizeof(float) + 5);
  const Tensor large = random_tensor({elements}, DType::F32, 9);
  write_safetensors(path, {{"w", large}});
  const SafetensorsFile file = SafetensorsFile::open(path);
  std::vector<float> out(static_cast<std::size_t>(elements));
  EXPECT_EQ(file.read_into("w", out.data(), large.nbytes()),
            crc32(large.raw_data(), large.nbytes()));
  EXPECT_EQ(std::memcmp(out.data(), large.raw_data(), large.nbytes()), 0);
  EXPECT_THROW(file.read_into("w", out.data(), large.nbytes() - 4), CheckpointError);
  // Cut in the last chunk, then in the first: every chunk from the cut on fails, and the
  // message says where the data stops, whichever thread failed first.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  const auto data_start = std::filesystem::file_size(path) - large.nbytes();
  for (const std::size_t kept : {large.nbytes() - 10, std::size_t{1000}}) {
    std::filesystem::resize_file(path, data_start + kept);
    try {
      file.read_into("w", out.data(), large.nbytes());
      ADD_FAILURE() << "read of a truncated file succeeded";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("cut short: read " + std::to_string(kept) + " of"),
                std::string::npos)
          << e.what();
    }
  }
  omp_set_num_threads(threads);
}

TEST(Safetensors, RoundTripsEveryDtypeAndShape) {
  ScratchDir dir;
  const std::string path = dir.file("model.safetensors");
  const auto tensors = sample_tensors();
  write_safetensors(path, tensors);

  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.path(), path);
  ASSERT_EQ(f.entries().size(), tensors.size());
  EXPECT_TRUE(f.metadata().empty());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, want] = tensors[i];
    const SafetensorsEntry& e = f.entries()[i];
    EXPECT_EQ(e.name, name);  // file order is the order written
    EXPECT_EQ(e.dtype, want.dtype()) << name;
    EXPECT_EQ(e.shape, want.shape()) << name;
    EXPECT_EQ(e.begin, offset) << name;
    EXPECT_EQ(e.end - e.begin, static_cast<std::int64_t>(want.nbytes())) << name;
    offset = e.end;
    ASSERT_EQ(f.find(name), &e) << name;
    const Tensor got = f.read(name);
    EXPECT_EQ(got.shape(), want.shape()) << name;
    EXPECT_EQ(got.dtype(), want.dtype()) << name;
    EXPECT_TRUE(got.is_contiguous()) << name;
    test::expect_bitwise_equal(name, bytes_of(got), bytes_of(want));
  }
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_THROW(f.read("missing"), CheckpointError);
  // The data starts 8-byte aligned and the file ends with the last tensor.
  std::uint64_t header_bytes = 0;
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(&header_bytes), 8);
  EXPECT_EQ((8 + header_bytes) % 8, 0u);
  EXPECT_EQ(std::filesystem::file_size(path),
            8 + header_bytes + static_cast<std::uint64_t>(offset));
}

TEST(Safetensors, MetadataRoundTrips) {
  ScratchDir dir;
  const std::string path = dir.file("meta.safetensors");
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"step", "1200"},
      {"quotes \"and\" \\backslashes\\",
       "line\nbreak\ttab \x01 control, caf\xc3\xa9 / \xf0\x9f\x99\x82"},
      {"empty", ""},
  };
  write_safetensors(path, {{"x", random_tensor({2}, DType::F32, 1)}}, metadata);
  EXPECT_EQ(SafetensorsFile::open(path).metadata(), metadata);
  // Metadata alone, no tensors.
  write_safetensors(path, {}, metadata);
  const SafetensorsFile only = SafetensorsFile::open(path);
  EXPECT_TRUE(only.entries().empty());
  EXPECT_EQ(only.metadata(), metadata);
}

// ---- a second reader, written from the format description alone ------------------------------

struct Json;
using JsonObject = std::vector<std::pair<std::string, Json>>;
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, std::vector<Json>, JsonObject> v;
};

// A minimal strict JSON reader; throws std::runtime_error on anything malformed.
struct MiniJson {
  const std::string& s;
  std::size_t i = 0;
  void ws() { while (i < s.size() && std::strchr(" \t\r\n", s[i]) && s[i]) ++i; }
  char next() {
    if (i >= s.size()) throw std::runtime_error("end of input");
    return s[i++];
  }
  std::string str() {
    if (next() != '"') throw std::runtime_error("expected string");
    std::string out;
    for (char c; (c = next()) != '"';) {
      if (c != '\\') { out += c; continue; }
      c = next();
      const std::string simple = "\"\\/bfnrt", value = "\"\\/\b\f\n\r\t";
      if (auto k = simple.find(c); k != std::string::npos) { out += value[k]; continue; }
      if (c != 'u') throw std::runtime_error("bad escape");
      const unsigned cp = static_cast<unsigned>(std::stoul(s.substr(i, 4), nullptr, 16));
      i += 4;
      if (cp >= 0x80)
        throw std::runtime_error("this test's writer only escapes control characters");
      out += static_cast<char>(cp);
    }
    return out;
  }
  Json value() {
    ws();
    Json j;
    const char c = i < s.size() ? s[i] : '\0';
    if (c == '{') {
      ++i;
      JsonObject obj;
      ws();
      if (s[i] == '}') { ++i; j.v = obj; return j; }
      for (;;) {
        ws();
        std::string key = str();
        ws();
        if (next() != ':') throw std::runtime_error("expected :");
        obj.emplace_back(key, value());
        ws();
        const char sep = next();
        if (sep == '}') break;
        if (sep != ',') throw std::runtime_error("expected , or }");
      }
      j.v = obj;
    } else if (c == '[') {
      ++i;
      std::vector<Json> arr;
      ws();
      if (s[i] == ']') { ++i; j.v = arr; return j; }
      for (;;) {
        arr.push_back(value());
        ws();
        const char sep = next();
        if (sep == ']') break;
        if (sep != ',') throw std::runtime_error("expected , or ]");
      }
      j.v = arr;
    } else if (c == '"') {
      j.v = str();
    } else {
      std::size_t used = 0;
      j.v = std::stod(s.substr(i), &used);
      i += used;
    }
    return j;
  }
};

TEST(Safetensors, HeaderReadsBackWithAnIndependentReader) {
  ScratchDir dir;
  const std::string path = dir.file("independent.safetensors");
  const auto tensors = sample_tensors();
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"note", "a \"quoted\"\nline"}};
  write_safetensors(path, tensors, metadata);

  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(file.size(), 8u);
  std::uint64_t n = 0;
  for (int b = 7; b >= 0; --b)
    n = n << 8 | static_cast<unsigned char>(file[static_cast<std::size_t>(b)]);
  ASSERT_LE(8 + n, file.size());
  const std::string header = file.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'))
      << "padding is spaces after the object";
  MiniJson parser{header};
  Json root;
  ASSERT_NO_THROW(root = parser.value()) << header;
  parser.ws();
  EXPECT_EQ(parser.i, header.size()) << "text after the JSON object";
  const std::string data = file.substr(8 + n);

  const auto& obj = std::get<JsonObject>(root.v);
  const std::map<DType, std::string> dtype_names = {{DType::F32, "F32"}, {DType::BF16, "BF16"},
                                                    {DType::F16, "F16"}, {DType::I32, "I32"},
                                                    {DType::U16, "U16"}};
  std::size_t seen = 0;
  for (const auto& [name, tensor] : tensors) {
    const Json* entry = nullptr;
    for (const auto& [key, value] : obj) if (key == name) entry = &value;
    ASSERT_NE(entry, nullptr) << name;
    std::map<std::string, const Json*> fields;
    for (const auto& [key, value] : std::get<JsonObject>(entry->v)) fields[key] = &value;
    EXPECT_EQ(std::get<std::string>(fields.at("dtype")->v), dtype_names.at(tensor.dtype())) << name;
    Shape shape;
    for (const Json& e : std::get<std::vector<Json>>(fields.at("shape")->v))
      shape.push_back(static_cast<std::int64_t>(std::get<double>(e.v)));
    EXPECT_EQ(shape, tensor.shape()) << name;
    const auto& offsets = std::get<std::vector<Json>>(fields.at("data_offsets")->v);
    ASSERT_EQ(offsets.size(), 2u);
    const auto begin = static_cast<std::size_t>(std::get<double>(offsets[0].v));
    const auto end = static_cast<std::size_t>(std::get<double>(offsets[1].v));
    ASSERT_LE(end, data.size()) << name;
    const std::vector<unsigned char> got(data.begin() + static_cast<std::ptrdiff_t>(begin),
                                         data.begin() + static_cast<std::ptrdiff_t>(end));
    test::expect_bitwise_equal(name, got, bytes_of(tensor));
    ++seen;
  }
  std::map<std::string, std::string> got_metadata;
  for (const auto& [key, value] : obj) {
    if (key != "__metadata__") continue;
    for (const auto& [k, v] : std::get<JsonObject>(value.v))
      got_metadata[k] = std::get<std::string>(v.v);
  }
  EXPECT_EQ(got_metadata, metadata);
  EXPECT_EQ(obj.size(), seen + 1) << "one entry per tensor plus __metadata__";
}

// ---- bad files ---------------------------------------------------------------------------------

TEST(Safetensors, RefusesBadFilesNamingThem) {
  ScratchDir dir;
  const std::string entry = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

  const std::string missing = dir.file("missing.safetensors");
  expect_refused(missing, "No such file");

  const std::string tiny = dir.file("tiny.safetensors");
  write_bytes(tiny, "abc");
  expect_refused(tiny, "too short");

  const std::string truncated = dir.file("truncated.safetensors");
  write_bytes(truncated, raw_file(entry, 5));  // 8 data bytes promised, 5 there
  expect_refused(truncated, "truncated");

  const std::string long_header = dir.file("long_header.safetensors");
  write_bytes(long_header, raw_file(entry, 8, 1000));
  expect_refused(long_header, "larger than the file");

  const std::string huge_header = dir.file("huge_header.safetensors");
  write_bytes(huge_header, raw_file(entry, 8, std::numeric_limits<std::int64_t>::max()));
  expect_refused(huge_header, "larger than the file");

  const std::string broken = dir.file("broken.safetensors");
  write_bytes(broken, raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8));
  expect_refused(broken, "invalid JSON");

  const std::string not_json = dir.file("not_json.safetensors");
  write_bytes(not_json, raw_file(R"({"a":{"dtype":F32,"shape":[2],"data_offsets":[0,8]}})", 8));
  expect_refused(not_json, "invalid JSON");

  const std::string twice = dir.file("twice.safetensors");
  write_bytes(twice, raw_file(R"({"a":{"dtype":"F32","shape":[2],"dtype":"F32",)"
                              R"("data_offsets":[0,8]}})", 8));
  expect_refused(twice, "key 'dtype' appears twice");

  const std::string deep = dir.file("deep.safetensors");
  write_bytes(deep, raw_file("{\"__metadata__\":" + std::string(100, '[') +
                                 std::string(100, ']') + "}", 0));
  expect_refused(deep, "nested deeper than 64 levels");

  const std::string trailing = dir.file("trailing.safetensors");
  write_bytes(trailing, raw_file(entry + "{}", 8));
  expect_refused(trailing, "invalid JSON");

  // nlohmann refuses a number past a double's range with another exception than a syntax error.
  const std::string huge_number = dir.file("huge_number.safetensors");
  write_bytes(huge_number,
              raw_file(R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,8]}})", 8));
  expect_refused(huge_number, "invalid JSON header");

  const std::string fraction = dir.file("fraction.safetensors");
  write_bytes(fraction, raw_file(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8));
  expect_refused(fraction, "shape holds something other than non-negative integers");

  const std::string overlapping = dir.file("overlapping.safetensors");
  write_bytes(overlapping,
              raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12));
  expect_refused(overlapping, "overlap");

  const std::string mismatched = dir.file("mismatched.safetensors");
  write_bytes(mismatched,
              raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 12));
  expect_refused(mismatched, "needs 12");

  const std::string unknown_dtype = dir.file("unknown_dtype.safetensors");
  write_bytes(unknown_dtype,
              raw_file(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8));
  expect_refused(unknown_dtype, "F64");

  const std::string bad_shape = dir.file("bad_shape.safetensors");
  write_bytes(bad_shape, raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8));
  expect_refused(bad_shape, "shape");

  const std::string overflowing = dir.file("overflowing.safetensors");
  write_bytes(overflowing, raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
                                    R"("data_offsets":[0,0]}})", 0));
  expect_refused(overflowing, "too large");

  const std::string missing_field = dir.file("missing_field.safetensors");
  write_bytes(missing_field, raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", 8));
  expect_refused(missing_field, "data_offsets");

  const std::string bad_metadata = dir.file("bad_metadata.safetensors");
  write_bytes(bad_metadata, raw_file(R"({"__metadata__":{"step":12}})", 0));
  expect_refused(bad_metadata, "not a string");

  // A file that was valid when opened and was cut short before the read.
  const std::string cut = dir.file("cut.safetensors");
  write_safetensors(cut, {{"x", random_tensor({64}, DType::F32, 3)}});
  const SafetensorsFile f = SafetensorsFile::open(cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 10);
  try {
    f.read("x");
    ADD_FAILURE() << "read of a truncated file succeeded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(cut), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cut short"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, WriteFailuresAreReported) {
  ScratchDir dir;
  const std::string unwritable = dir.file("no-such-dir/model.safetensors");
  try {
    write_safetensors(unwritable, {{"x", random_tensor({4}, DType::F32, 1)}});
    ADD_FAILURE() << "write into a missing directory succeeded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(unwritable), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  // /dev/full accepts the open and fails every write with ENOSPC: a full disk.
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  try {
    write_safetensors("/dev/full", {{"x", random_tensor({4}, DType::F32, 1)}});
    ADD_FAILURE() << "write to a full device succeeded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(ENOSPC)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ternion
