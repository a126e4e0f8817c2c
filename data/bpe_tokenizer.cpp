// BpeTokenizer's file reading and writing, decoding and accessors; tokenizer.json's fields are
// read in bpe_json.cpp, encoding is bpe_encode.cpp, training bpe_trainer.cpp.
#include "data/bpe_tokenizer.h"

#include <filesystem>

#include "data/atomic_file.h"
#include "data/bpe_state.h"
#include "framework/error.h"
#include "framework/read_file.h"

namespace ternion {


BpeTokenizer::BpeTokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  std::string why;
  const std::optional<std::string> text = read_whole_file(path, why);
  TN_CHECK_AS(DataError, text.has_value(), "cannot read tokenizer '", path, "': ", why);
  return from_json(*text, path);
}

void BpeTokenizer::save(const std::string& path) const {
  const std::string text = to_json();
  write_file_atomically(path, "tokenizer",
                        [&](int fd) { return write_all(fd, text.data(), text.size()); });
}

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
