// BpeTokenizer::train: a byte-level BPE (GPT-2's or Llama 3's style), as tokenizers'
// BpeTrainer learns it.
//
// The text (special tokens cut out) is split by the style's pattern and the pieces counted: a
// word is a distinct piece, a sequence of byte tokens, weighted by its count. Ids: the special
// tokens, then the 256 bytes in the order of their code points in GPT-2's alphabet (as
// tokenizers numbers its initial alphabet), then one per merge. Each step merges the pair of
// adjacent tokens with the highest count (ties: the smallest pair of ids) in every word that
// holds it. Counts are updated from what each merge changes, and a priority queue holds
// (count, pair) entries that may be stale: an entry whose count is no longer the pair's is put
// back with the current count when it comes up. That is exact because a pair's count only
// grows when a merge creates it, and then a fresh entry is pushed.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "data/bpe_state.h"
#include "data/byte_level.h"
#include "framework/error.h"

namespace ternion {

namespace {

using Pair = std::uint64_t;  // left id << 32 | right id: ordered as (left, right)

Pair pair_of(std::int32_t left, std::int32_t right) {
  return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) |
         static_cast<std::uint32_t>(right);
}
std::int32_t left_of(Pair pair) { return static_cast<std::int32_t>(pair >> 32); }
std::int32_t right_of(Pair pair) { return static_cast<std::int32_t>(pair & 0xFFFFFFFFu); }

struct PairStats {
  std::int64_t count = 0;
  std::vector<std::int32_t> words;  // that held the pair when it was counted (some may no longer)
};

struct QueueEntry {
  std::int64_t count;
  Pair pair;
  // The highest count first; among equal counts the smallest pair.
  bool operator<(const QueueEntry& other) const {
    return count != other.count ? count < other.count : pair > other.pair;
  }
};

// The text between its special tokens, whose text is not learned from.
std::vector<std::string_view> without_special_tokens(
    std::string_view text, const std::vector<std::string>& special_tokens) {
  AddedTokenMatcher specials;
  for (std::size_t i = 0; i < special_tokens.size(); ++i)
    specials.add(special_tokens[i], static_cast<std::int32_t>(i));
  std::vector<std::string_view> parts;
  std::size_t pos = 0, begin = 0, end = 0;
  std::int32_t id = -1;
  while (specials.find(text, pos, &begin, &end, &id)) {
    if (begin > pos) parts.push_back(text.substr(pos, begin - pos));
    pos = end;
  }
  if (pos < text.size()) parts.push_back(text.substr(pos));
  return parts;
}

// The distinct pieces of the subjects, each split on its own, and their counts.
std::unordered_map<std::string_view, std::int64_t> count_words(
    const std::vector<std::string_view>& subjects, const BpeRegex& regex) {
  BpeRegex::Matcher matcher(regex);
  std::unordered_map<std::string_view, std::int64_t> counts;
  for (const std::string_view subject : subjects) {
    IsolatedSplit split(matcher, subject, 0);
    IsolatedSplit::Piece piece;
    while (split.next(&piece)) ++counts[subject.substr(piece.begin, piece.end - piece.begin)];
  }
  return counts;
}

class Trainer {
 public:
  Trainer(const std::vector<std::string>& special_tokens, std::int64_t vocab_size)
      : vocab_size_(vocab_size) {
    for (const std::string& token : special_tokens) add_token(token);
    std::array<std::uint8_t, 256> bytes;
    for (int b = 0; b < 256; ++b) bytes[b] = static_cast<std::uint8_t>(b);
    std::sort(bytes.begin(), bytes.end(), [](std::uint8_t a, std::uint8_t b) {
      return byte_level::byte_to_code_point(a) < byte_level::byte_to_code_point(b);
    });
    for (std::uint8_t b : bytes)
      byte_ids_[b] = add_token(byte_level::to_text(std::string(1, static_cast<char>(b))));
  }

  void count(const std::unordered_map<std::string_view, std::int64_t>& word_counts) {
    // The order of the words changes nothing learned: pairs are ranked by count and ids.
    for (const auto& [piece, count] : word_counts) {
      const auto w = static_cast<std::int32_t>(words_.size());
      std::vector<std::int32_t> word;
      word.reserve(piece.size());
      for (char c : piece) word.push_back(byte_ids_[static_cast<std::uint8_t>(c)]);
      for (std::size_t i = 0; i + 1 < word.size(); ++i)
        note(pair_of(word[i], word[i + 1]), count, w);
      words_.push_back(std::move(word));
      counts_.push_back(count);
    }
    for (const auto& [pair, stats] : pairs_) queue_.push({stats.count, pair});
    last_merge_of_word_.assign(words_.size(), -1);
  }

  // Merges until the vocabulary is full or no pair occurs twice.
  void merge_all() {
    while (static_cast<std::int64_t>(tokens_.size()) < vocab_size_ && !queue_.empty()) {
      const QueueEntry top = queue_.top();
      queue_.pop();
      PairStats& stats = pairs_[top.pair];
      if (top.count != stats.count) {
        if (stats.count > 0) queue_.push({stats.count, top.pair});
        continue;
      }
      if (top.count < 2) break;
      merge(top.pair, stats);
    }
  }

  // The trained model into `state`.
  void fill(BpeTokenizer::State* state) {
    state->model_tokens = std::move(tokens_);
    state->in_model.assign(state->model_tokens.size(), true);
    state->merges = std::move(merges_);
  }

 private:
  std::int32_t add_token(const std::string& text) {
    const auto [it, fresh] = ids_.emplace(text, static_cast<std::int32_t>(tokens_.size()));
    if (fresh) tokens_.push_back(text);
    return it->second;
  }

  // `count` more of `pair`, in word w.
  void note(Pair pair, std::int64_t count, std::int32_t w) {
    PairStats& stats = pairs_[pair];
    stats.count += count;
    if (count > 0 && (stats.words.empty() || stats.words.back() != w)) stats.words.push_back(w);
  }

  void merge(Pair pair, PairStats& stats) {
    const std::int32_t a = left_of(pair), b = right_of(pair);
    // A token may be made twice, by different pairs ("ab"+"c", "a"+"bc"): it keeps one id.
    const std::int32_t made =
        add_token(tokens_[static_cast<std::size_t>(a)] + tokens_[static_cast<std::size_t>(b)]);
    const auto step = static_cast<std::int32_t>(merges_.size());
    merges_.push_back({a, b, made});
    grown_.clear();
    const std::vector<std::int32_t> words = std::move(stats.words);
    stats.words.clear();
    for (std::int32_t w : words) {
      if (last_merge_of_word_[static_cast<std::size_t>(w)] == step) continue;
      last_merge_of_word_[static_cast<std::size_t>(w)] = step;
      merge_in_word(a, b, made, w);
    }
    std::sort(grown_.begin(), grown_.end());
    grown_.erase(std::unique(grown_.begin(), grown_.end()), grown_.end());
    for (Pair grown : grown_) {
      const std::int64_t count = pairs_[grown].count;
      if (count > 0) queue_.push({count, grown});
    }
  }

  // Every occurrence of (a, b) in word w, left to right, becomes `made`; the counts of the
  // pairs around each follow.
  void merge_in_word(std::int32_t a, std::int32_t b, std::int32_t made, std::int32_t w) {
    std::vector<std::int32_t>& word = words_[static_cast<std::size_t>(w)];
    const std::int64_t count = counts_[static_cast<std::size_t>(w)];
    const auto change = [&](std::int32_t left, std::int32_t right, std::int64_t delta) {
      note(pair_of(left, right), delta, w);
      if (delta > 0) grown_.push_back(pair_of(left, right));
    };
    std::size_t out = 0;
    for (std::size_t i = 0; i < word.size(); ++i) {
      if (word[i] == a && i + 1 < word.size() && word[i + 1] == b) {
        change(a, b, -count);
        if (out > 0) {
          change(word[out - 1], a, -count);
          change(word[out - 1], made, count);
        }
        if (i + 2 < word.size()) {
          change(b, word[i + 2], -count);
          change(made, word[i + 2], count);
        }
        word[out++] = made;
        ++i;
      } else {
        word[out++] = word[i];
      }
    }
    word.resize(out);
  }

  std::int64_t vocab_size_;
  std::vector<std::string> tokens_;  // by id, as tokenizer.json writes them
  std::unordered_map<std::string, std::int32_t> ids_;
  std::array<std::int32_t, 256> byte_ids_{};
  std::vector<std::vector<std::int32_t>> words_;
  std::vector<std::int64_t> counts_;
  std::unordered_map<Pair, PairStats> pairs_;
  std::priority_queue<QueueEntry> queue_;
  std::vector<std::int32_t> last_merge_of_word_;
  std::vector<Pair> grown_;
  std::vector<BpeTokenizer::State::Merge> merges_;
};

}  // namespace

BpeTokenizer BpeTokenizer::train(std::string_view text, std::int64_t vocab_size,
                                 const std::vector<std::string>& special_tokens, Style style) {
  const std::int64_t bad = first_invalid_utf8(text);
  TN_CHECK_AS(DataError, bad < 0, "the text to train a tokenizer on is not UTF-8 at byte offset ",
              bad);
  return train_on(without_special_tokens(text, special_tokens), vocab_size, special_tokens, style);
}

BpeTokenizer BpeTokenizer::train(std::span<const std::string> documents, std::int64_t vocab_size,
                                 const std::vector<std::string>& special_tokens, Style style) {
  std::vector<std::string_view> subjects;
  for (std::size_t d = 0; d < documents.size(); ++d) {
    const std::int64_t bad = first_invalid_utf8(documents[d]);
    TN_CHECK_AS(DataError, bad < 0, "document ", d + 1,
                " to train a tokenizer on is not UTF-8 at byte offset ", bad);
    subjects.push_back(documents[d]);
  }
  return train_on(subjects, vocab_size, special_tokens, style);
}

BpeTokenizer BpeTokenizer::train_on(const std::vector<std::string_view>& subjects,
                                    std::int64_t vocab_size,
                                    const std::vector<std::string>& special_tokens, Style style) {
  const auto least = static_cast<std::int64_t>(256 + special_tokens.size());
  TN_CHECK_AS(UsageError, vocab_size >= least && vocab_size <= (std::int64_t{1} << 31) - 1,
              "a byte-level BPE's vocabulary size must be from ", least, " (256 bytes and ",
              special_tokens.size(), " special tokens) to 2^31 - 1, got ", vocab_size);
  std::unordered_set<std::string> distinct;
  for (const std::string& token : special_tokens) {
    TN_CHECK_AS(UsageError, !token.empty(), "a special token is empty");
    TN_CHECK_AS(UsageError, first_invalid_utf8(token) < 0, "special token '", token,
                "' is not UTF-8");
    TN_CHECK_AS(UsageError, distinct.insert(token).second, "special token '", token,
                "' is given twice");
  }
  auto state = std::make_unique<State>();
  state->source = "trained";
  if (style == Style::llama3) {
    const auto begin = std::find(special_tokens.begin(), special_tokens.end(), "<|begin_of_text|>");
    TN_CHECK_AS(UsageError, begin != special_tokens.end(),
                "a Llama 3-style tokenizer needs the special token <|begin_of_text|>");
    const auto begin_id = static_cast<std::int32_t>(begin - special_tokens.begin());
    state->regex.emplace(kLlama3Pattern, "Llama 3's pattern");
    state->pre_tokenizer_json = llama3_pre_tokenizer_json();
    state->post_processor_json = llama3_post_processor_json(begin_id);
    state->special_token_template.before = {begin_id};
  } else {
    state->regex.emplace(kGpt2Pattern, "GPT-2's pattern");
    state->pre_tokenizer_json = gpt2_pre_tokenizer_json();
    state->post_processor_json = gpt2_post_processor_json();
  }
  state->decoder_json = gpt2_decoder_json();

  Trainer trainer(special_tokens, vocab_size);
  trainer.count(count_words(subjects, *state->regex));
  trainer.merge_all();
  trainer.fill(state.get());
  for (std::size_t i = 0; i < special_tokens.size(); ++i)
    state->added_tokens.push_back({static_cast<std::int32_t>(i), special_tokens[i], true, false});
  state->index();
  return BpeTokenizer(std::move(state));
}

}  // namespace ternion
