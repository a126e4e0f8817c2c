#include "data/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "data/byte_tokenizer.h"
#include "framework/error.h"

namespace ternion {

Tokenizer Tokenizer::bytes() { return Tokenizer(std::shared_ptr<const BpeTokenizer>()); }

Tokenizer::Tokenizer(BpeTokenizer bpe)
    : bpe_(std::make_shared<const BpeTokenizer>(std::move(bpe))) {}

Tokenizer::Tokenizer(std::shared_ptr<const BpeTokenizer> bpe) : bpe_(std::move(bpe)) {}

Tokenizer Tokenizer::open(const std::string& key, const std::string& path) {
  if (path.empty()) return bytes();
  try {
    return Tokenizer(BpeTokenizer::load(path));
  } catch (const DataError& e) {
    TN_THROW(DataError, key, ": ", e.what());
  }
}

std::int64_t Tokenizer::vocab_size() const {
  return bpe_ != nullptr ? bpe_->vocab_size() : kByteVocabSize;
}

std::string Tokenizer::describe() const {
  return (bpe_ != nullptr ? "byte-level BPE (" : "bytes (") + std::to_string(vocab_size()) +
         " tokens)";
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, int threads) const {
  if (bpe_ != nullptr) return bpe_->encode(text, threads);
  const std::vector<std::uint16_t> bytes = encode_bytes(text);
  return std::vector<std::int32_t>(bytes.begin(), bytes.end());
}

std::vector<std::int32_t> Tokenizer::encode_prompt(std::string_view prompt) const {
  return bpe_ != nullptr ? bpe_->encode_with_special_tokens(prompt) : encode(prompt);
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  if (bpe_ == nullptr) return decode_bytes(ids);
  // Runs of known ids decode together, so multi-token characters come out whole.
  std::string text;
  std::size_t run_begin = 0;
  for (std::size_t i = 0; i <= ids.size(); ++i) {
    if (i < ids.size() && bpe_->knows(ids[i])) continue;
    text += bpe_->decode(ids.subspan(run_begin, i - run_begin));
    if (i < ids.size()) text.append("<").append(std::to_string(ids[i])).append(">");
    run_begin = i + 1;
  }
  return text;
}

namespace {
constexpr const char* kEndOfTextTokens[] = {"<|endoftext|>", "<|end_of_text|>"};
}  // namespace

std::string Tokenizer::end_of_text() const {
  if (bpe_ == nullptr) return "";
  for (const char* token : kEndOfTextTokens)
    if (bpe_->added_token_id(token) >= 0) return token;
  return "";
}

std::int32_t Tokenizer::end_of_text_id() const {
  const std::string token = end_of_text();
  return token.empty() ? -1 : bpe_->added_token_id(token);
}

std::string Tokenizer::begin_of_text() const {
  constexpr const char* kBeginOfText = "<|begin_of_text|>";
  if (bpe_ != nullptr && bpe_->added_token_id(kBeginOfText) >= 0) return kBeginOfText;
  return end_of_text();
}

std::int32_t Tokenizer::begin_of_text_id() const {
  const std::string token = begin_of_text();
  return token.empty() ? -1 : bpe_->added_token_id(token);
}

Tokenizer::DocumentMarkers Tokenizer::document_markers() const {
  const std::string begin = begin_of_text(), end = end_of_text();
  if (begin == end) return {end, ""};
  return {begin, end};
}

std::string Tokenizer::prompt_problem(std::string_view prompt, std::int64_t vocab_size) const {
  // An empty prompt is a start where the template gives a token to continue (Llama 3's).
  if (bpe_ == nullptr || (prompt.empty() && bpe_->encode_with_special_tokens("").empty()))
    return ternion::prompt_problem(prompt, vocab_size);
  const std::int64_t bad_byte = first_invalid_utf8(prompt);
  if (bad_byte >= 0)
    return "the prompt is not UTF-8 (byte " + std::to_string(bad_byte) +
           "), which a BPE tokenizer needs";
  for (std::int32_t id : bpe_->encode_with_special_tokens(prompt)) {
    if (id < vocab_size) continue;
    return "the prompt encodes to token " + std::to_string(id) +
           ", outside the model's vocabulary of " + std::to_string(vocab_size);
  }
  // A byte without a token is dropped, or read as unk_token: the model would continue a prompt
  // other than the one printed.
  const std::vector<std::int32_t> ids = bpe_->encode(prompt);
  const std::string decoded = bpe_->decode(ids);
  if (decoded == prompt) return "";
  const auto [given, _] = std::mismatch(prompt.begin(), prompt.end(), decoded.begin(),
                                        decoded.end());
  const auto at = static_cast<std::size_t>(given - prompt.begin());
  if (at == prompt.size()) return "the prompt does not encode to itself with this tokenizer";
  char byte[32];
  std::snprintf(byte, sizeof byte, "byte %zu (0x%02X)", at, static_cast<unsigned char>(prompt[at]));
  if (ids.empty())
    return std::string("the prompt encodes to no tokens: the tokenizer has no token for its ") +
           byte + ", and a sample continues at least one token";
  return std::string("the prompt's ") + byte + " has no token in the tokenizer, which drops " +
         "it or reads it as unk_token: the model would continue a prompt other than the one given";
}

}  // namespace ternion
