// Tokenizer: how a run's text becomes tokens and back. Either bytes (token = byte value,
// vocabulary 256, data/byte_tokenizer.h; no file needed) or a byte-level BPE read from a
// Hugging Face tokenizer.json (data/bpe_tokenizer.h), as `data.tokenizer` names it. Copies
// share one loaded BPE; all members are const and thread-safe.
//
// Decoding never fails: an id the tokenizer has no token for (a model may have a larger
// vocabulary than its tokenizer, padded for speed, and a tokenizer's ids may leave gaps)
// decodes as "<id>", visibly.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_tokenizer.h"

namespace ternion {

class Tokenizer {
 public:
  static Tokenizer bytes();
  // `path` empty: bytes. Otherwise the tokenizer.json there; a file that cannot be read or is
  // not byte-level BPE throws DataError naming `key` and the file.
  static Tokenizer open(const std::string& key, const std::string& path);
  explicit Tokenizer(BpeTokenizer bpe);

  bool is_bytes() const { return bpe_ == nullptr; }
  const BpeTokenizer* bpe() const { return bpe_.get(); }
  std::int64_t vocab_size() const;  // one more than its largest id
  std::string describe() const;     // "bytes (256 tokens)", "byte-level BPE (4096 tokens)"

  // The token that separates documents, as an added token's text: GPT-2's "<|endoftext|>"
  // (also ternion-prepare's trained tokenizers') or Llama 3's "<|end_of_text|>"; "" where the
  // tokenizer has neither (bytes have none).
  std::string end_of_text() const;
  std::int32_t end_of_text_id() const;  // its id, or -1
  // The token a document starts with where the tokenizer has one of its own (Llama 3's
  // "<|begin_of_text|>"), else the end-of-text token, as GPT-2 uses it; -1 where neither is.
  std::string begin_of_text() const;
  std::int32_t begin_of_text_id() const;
  // What goes around each document in the token stream, as text: GPT-2's end of text before
  // it (llm.c's layout: each document then ends where the next begins), or Llama 3's begin
  // and end of text around it (torchtitan's). Both empty where the tokenizer has neither.
  struct DocumentMarkers {
    std::string before, after;
  };
  DocumentMarkers document_markers() const;

  // Bytes take any bytes; BPE needs UTF-8 (DataError naming the offset otherwise).
  std::vector<std::int32_t> encode(std::string_view text, int threads = 1) const;
  // A prompt's tokens: its text between the special tokens the tokenizer.json's post-processor
  // adds to a text (Llama 3's <|begin_of_text|> before it; none for GPT-2's or bytes), as
  // transformers' tokenizer(prompt) gives them: the model sees a prompt as a document's start.
  std::vector<std::int32_t> encode_prompt(std::string_view prompt) const;
  std::string decode(std::span<const std::int32_t> ids) const;

  // Why `prompt` cannot be the input of a model of `vocab_size` tokens ("" when it can): it
  // has no tokens (empty, and no template token before it), a token of encode_prompt's is at or
  // above vocab_size, or (BPE) the text is not UTF-8 or does not encode to itself.
  std::string prompt_problem(std::string_view prompt, std::int64_t vocab_size) const;

 private:
  explicit Tokenizer(std::shared_ptr<const BpeTokenizer> bpe);
  std::shared_ptr<const BpeTokenizer> bpe_;  // null: bytes
};

}  // namespace ternion
