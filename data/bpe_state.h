// What a BpeTokenizer holds, shared by the files that implement it (bpe_tokenizer.cpp reads
// and writes tokenizer.json and decodes, bpe_encode.cpp encodes, bpe_trainer.cpp trains).
// Not part of the data library's interface.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/bpe_regex.h"
#include "data/bpe_tokenizer.h"
#include "framework/strict_json.h"

namespace ternion {

// Merge rules by pair: (left id, right id) -> (rank, merged id), open addressing.
class MergeTable {
 public:
  struct Rule {
    std::int32_t rank = -1;
    std::int32_t merged = -1;
  };
  explicit MergeTable(std::size_t count = 0);
  // A pair given again replaces its rule (as tokenizers' map of merges does: the later wins).
  void set(std::int32_t left, std::int32_t right, Rule rule);
  const Rule* find(std::int32_t left, std::int32_t right) const {
    const std::uint64_t key = pack(left, right);
    for (std::size_t slot = hash(key);; slot = (slot + 1) & mask_) {
      if (keys_[slot] == key) return &rules_[slot];
      if (keys_[slot] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  static std::uint64_t pack(std::int32_t left, std::int32_t right) {
    return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) |
           static_cast<std::uint32_t>(right);
  }
  std::size_t hash(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_) & mask_;
  }
  std::vector<std::uint64_t> keys_;
  std::vector<Rule> rules_;
  std::size_t mask_ = 0;
  int shift_ = 0;
};

// Leftmost-longest matching of a set of strings (tokenizers' Aho-Corasick over added tokens),
// by a byte trie walked from each position that can begin one.
class AddedTokenMatcher {
 public:
  void add(std::string_view content, std::int32_t id);
  bool empty() const { return nodes_.size() == 1; }
  // The match in text[from..] that begins first, the longest of those: true with
  // [*begin, *end) and its *id.
  bool find(std::string_view text, std::size_t from, std::size_t* begin, std::size_t* end,
            std::int32_t* id) const;

 private:
  struct Node {
    std::int32_t id = -1;
    std::vector<std::pair<std::uint8_t, std::int32_t>> children;
  };
  std::int32_t child(std::int32_t node, std::uint8_t byte) const;
  std::vector<Node> nodes_{1};
  std::array<bool, 256> first_byte_{};
  int first_byte_count_ = 0;
  std::uint8_t only_first_byte_ = 0;
};

// What tokenizers' add_special_tokens puts around one text: the post-processor's template
// (Llama 3's: <|begin_of_text|> before it; none without a TemplateProcessing).
struct SpecialTokenTemplate {
  std::vector<std::int32_t> before, after;
};

struct BpeAddedToken {
  std::int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;  // matched in the normalized text (no normalizer: the same text)
};

struct BpeTokenizer::State {
  std::string source;  // names the file in messages

  // The model. Ids index these vectors; an id without a model token has an empty entry.
  std::vector<std::string> model_tokens;  // as tokenizer.json writes them (byte-level text)
  std::vector<bool> in_model;
  struct Merge {
    std::int32_t left, right, merged;
  };
  std::vector<Merge> merges;  // by rank
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool ignore_merges = false;

  // The pre-tokenizer: one regex, GPT-2's (ByteLevel) or a Split's. The JSON of the
  // pre-tokenizer, post-processor and decoder as read (to_json writes them back).
  std::optional<BpeRegex> regex;
  OrderedJson pre_tokenizer_json, post_processor_json, decoder_json;

  std::vector<BpeAddedToken> added_tokens;  // in the file's order
  SpecialTokenTemplate special_token_template;  // read from the post-processor

  // Derived by index() from the above.
  MergeTable merge_table;
  std::array<std::int32_t, 256> byte_ids{};  // each byte's model id; -1 where there is none
  std::unordered_map<std::string, std::int32_t> ids_by_bytes;  // model tokens of the alphabet
  std::int32_t unk_id = -1;
  AddedTokenMatcher raw_matcher, normalized_matcher;
  std::vector<std::string> decoded;  // each id's bytes
  std::vector<bool> known;           // the id has a token (model or added)

  // Builds the derived tables from the rest.
  void index();
};

// The tokenizer.json structure tokenizers writes for a GPT-2-style byte-level BPE: ByteLevel
// pre-tokenizer (GPT-2's regex), post-processor and decoder.
OrderedJson gpt2_pre_tokenizer_json();
OrderedJson gpt2_post_processor_json();
OrderedJson gpt2_decoder_json();
// Llama 3's: Sequence[Split by its pattern, ByteLevel without regex], and ByteLevel then the
// template that puts <|begin_of_text|> (id `begin`) before a text.
OrderedJson llama3_pre_tokenizer_json();
OrderedJson llama3_post_processor_json(std::int32_t begin);

}  // namespace ternion
