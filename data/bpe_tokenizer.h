// BpeTokenizer: a byte-level BPE tokenizer read from (and written as) a Hugging Face
// `tokenizer.json`, encoding and decoding exactly as Hugging Face's `tokenizers` does.
//
// Accepted files: model.type "BPE" over byte-level symbols (GPT-2's and Llama 3's kind), with
//   pre_tokenizer  ByteLevel{use_regex: true}  (GPT-2's pattern), or
//                  Sequence[Split{Regex, behavior Isolated}, ByteLevel{use_regex: false}]
//                  (Llama 3's kind), add_prefix_space false in either; the pattern in
//                  Oniguruma's syntax, as tokenizers reads it (data/bpe_regex.h: what is
//                  rewritten for PCRE2, what is refused);
//   normalizer     null; truncation and padding null; decoder ByteLevel; post_processor null,
//                  ByteLevel, TemplateProcessing or a Sequence of them with at most one
//                  TemplateProcessing, whose "single" template has one {"Sequence": {"id": "A"}}
//                  and SpecialToken items named in its "special_tokens", each id a token's
//                  (encode never applies it: it is `add_special_tokens=False`;
//                  encode_with_special_tokens does);
//   model options  dropout null, no continuing_subword_prefix / end_of_word_suffix ("" as
//                  GPT-2's file has is none), byte_fallback false; ignore_merges either way;
//                  unk_token null or a vocabulary token, fuse_unk either way (a byte without a
//                  token is dropped, or becomes unk_token, as in tokenizers); merges as "a b"
//                  strings or [a, b] pairs (a pair listed twice takes its later rank);
//   added_tokens   matched in the text before pre-tokenization, leftmost then longest first:
//                  those with normalized false in the whole text, then those with normalized
//                  true between them. Each with every flag given (tokenizers requires them),
//                  lstrip, rstrip and single_word false, each content once, each id the one
//                  tokenizers gives it (a vocabulary token's id; the others numbered on from
//                  the vocabulary's size, in order), and none a vocabulary token that stands
//                  for other bytes than its text ("é", the byte E9's symbol: its id would
//                  decode as either);
//   ids            below 2^31, with few gaps (the largest below 2 x the token count + 1024).
// Anything else throws DataError with one line naming the file and the field.
//
// Encoding (`encode`): the text must be valid UTF-8 (DataError giving the byte offset of the
// first invalid sequence); added tokens are split out, the rest is split by the pre-tokenizer's
// regex (PCRE2 with Unicode properties, JIT), each piece mapped to GPT-2's byte-to-unicode
// alphabet and merged by merge rank. With threads > 1 (fewer than 1 counts as 1) the text is
// split and merged on up to that many threads, each taking at least 64 KiB of it; the ids are
// the same for any thread count (bpe_encode.cpp says how). Const and safe to call from several
// threads at once.
//
// Decoding (`decode`): tokens to their strings, byte-level symbols back to bytes; added tokens
// decode as their content (special ones included). The result is bytes: encode then decode
// gives back the text exactly. An id outside the vocabulary throws DataError.
//
// Where this differs from tokenizers on purpose: decode returns the bytes, where tokenizers
// replaces a sequence that is not UTF-8 (ids that split a character) with U+FFFD; and an added
// token decodes as its content, where tokenizers' ByteLevel decoder maps it as byte-level
// symbols when every character of it is one ("Ġx" decodes as " x" there). Encoding matches
// tokenizers' for every accepted file, except for what its regex engine and PCRE2 read
// differently (bpe_regex.h: characters new in the latest Unicode, one-to-many case folding).
//
// Training (`train`) learns what tokenizers' BpeTrainer (min_frequency 2, the byte alphabet,
// the special tokens first) learns from the same word counts; tokenizers counts words line by
// line, this trainer over the whole text with the special tokens cut out.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ternion {

class BpeTokenizer {
 public:
  // Reads and checks a tokenizer.json; `source` names it in messages (a path, usually).
  static BpeTokenizer load(const std::string& path);
  static BpeTokenizer from_json(std::string_view json_text, const std::string& source);

  // What a trained tokenizer is like: GPT-2's (its pattern, as ByteLevel's regex; no
  // template), or Llama 3's (its pattern, in a Split; the template that puts
  // <|begin_of_text|>, which the special tokens must then hold, before a text).
  enum class Style { gpt2, llama3 };
  // Trains a byte-level BPE of `style` (byte alphabet of 256, the special tokens first with
  // ids 0, 1, ...) on `text` until the vocabulary holds `vocab_size` tokens or no pair occurs
  // twice. vocab_size must be at least 256 + special_tokens.size() and the special tokens
  // non-empty and distinct (UsageError otherwise); the text must be UTF-8 (DataError with the
  // offset). The special tokens' text is not learned from.
  static BpeTokenizer train(std::string_view text, std::int64_t vocab_size,
                            const std::vector<std::string>& special_tokens,
                            Style style = Style::gpt2);
  // The same on documents, each counted on its own: no piece spans two of them, and a special
  // token's text inside one is learned from as text (as encode_placed encodes it).
  static BpeTokenizer train(std::span<const std::string> documents, std::int64_t vocab_size,
                            const std::vector<std::string>& special_tokens,
                            Style style = Style::gpt2);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  std::vector<std::int32_t> encode(std::string_view text, int threads = 1) const;
  // `text` with the added tokens at the places given (in order, not overlapping), and the
  // rest encoded as text, an added token's text there included (tokenizers'
  // split_special_tokens, tiktoken's encode_ordinary): for documents whose markers the caller
  // places, which their text must not forge.
  struct PlacedToken {
    std::size_t begin, end;
    std::int32_t id;
  };
  std::vector<std::int32_t> encode_placed(std::string_view text,
                                          std::span<const PlacedToken> placed,
                                          int threads = 1) const;
  // `text` between the special tokens the post-processor's template adds to one text (Llama 3's
  // <|begin_of_text|> before it; none for GPT-2's), as tokenizers encodes with
  // add_special_tokens=True, transformers' default: how a prompt reaches a model.
  std::vector<std::int32_t> encode_with_special_tokens(std::string_view text) const;
  std::string decode(std::span<const std::int32_t> ids) const;

  // One more than the largest id, added tokens included: a model needs vocab_size >= this.
  std::int64_t vocab_size() const;
  // Whether `id` has a token (ids may leave gaps): what decode accepts.
  bool knows(std::int32_t id) const;
  // The id of an added token with this content, or -1.
  std::int32_t added_token_id(std::string_view content) const;

  // The tokenizer.json text (what `tokenizers` loads and encodes identically), and the same
  // written to `path` atomically (temporary name, fsync, rename; DataError on failure).
  std::string to_json() const;
  void save(const std::string& path) const;

  // What the implementation holds (data/bpe_state.h, not for users of this class).
  struct State;

 private:
  explicit BpeTokenizer(std::unique_ptr<State> state);
  // Trains on the pieces of `subjects`, each split by the pre-tokenizer on its own.
  static BpeTokenizer train_on(const std::vector<std::string_view>& subjects,
                               std::int64_t vocab_size,
                               const std::vector<std::string>& special_tokens, Style style);
  std::unique_ptr<State> state_;
};

// The byte offset of the first byte of `text` that does not begin a valid UTF-8 sequence
// (overlong forms, surrogates and code points above U+10FFFF are invalid), or -1.
std::int64_t first_invalid_utf8(std::string_view text);

}  // namespace ternion
