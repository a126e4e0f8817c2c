// BpeTokenizer's file reading and writing, decoding and accessors; tokenizer.json's fields are
// read in bpe_json.cpp, encoding is bpe_encode.cpp, training bpe_trainer.cpp.
#include "data/bpe_tokenizer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/bpe_state.h"
#include "framework/error.h"

namespace ternion {

namespace {

std::string errno_text() { return std::strerror(errno); }

// `text` to `path` through a temporary file that is fsynced and renamed into place, so a crash
// leaves the old file or the new one, never part of the new one.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TN_CHECK_AS(DataError, fd >= 0, "cannot write tokenizer '", path, "': cannot create '", temporary,
              "': ", errno_text());
  const auto fail = [&](const char* what) {
    const std::string reason = errno_text();
    ::close(fd);
    ::unlink(temporary.c_str());
    TN_THROW(DataError, "cannot write tokenizer '", path, "': ", what, ": ", reason);
  };
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    const std::string reason = errno_text();
    ::unlink(temporary.c_str());
    TN_THROW(DataError, "cannot write tokenizer '", path, "': close: ", reason);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(temporary.c_str());
    TN_THROW(DataError, "cannot write tokenizer '", path, "': rename: ", reason);
  }
  // The rename itself made durable; best effort (some filesystems refuse to fsync a directory).
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace

BpeTokenizer::BpeTokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TN_CHECK_AS(DataError, in.is_open(), "cannot read tokenizer '", path, "': ", errno_text());
  std::ostringstream text;
  text << in.rdbuf();
  TN_CHECK_AS(DataError, !in.bad(), "cannot read tokenizer '", path, "': ", errno_text());
  return from_json(text.str(), path);
}

void BpeTokenizer::save(const std::string& path) const { write_atomically(path, to_json()); }

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  const State& s = *state_;
  std::string text;
  for (std::int32_t id : ids) {
    TN_CHECK_AS(DataError, knows(id), "tokenizer '", s.source, "': id ", id,
                " is not in the vocabulary (", s.known.size(), " ids)");
    text += s.decoded[static_cast<std::size_t>(id)];
  }
  return text;
}

bool BpeTokenizer::knows(std::int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < state_->known.size() &&
         state_->known[static_cast<std::size_t>(id)];
}

std::int64_t BpeTokenizer::vocab_size() const {
  return static_cast<std::int64_t>(state_->known.size());
}

std::int32_t BpeTokenizer::added_token_id(std::string_view content) const {
  for (const BpeAddedToken& token : state_->added_tokens)
    if (token.content == content) return token.id;
  return -1;
}

}  // namespace ternion
