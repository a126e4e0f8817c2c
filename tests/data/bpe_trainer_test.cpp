// BpeTokenizer::train: the merges of a corpus worked out by hand (the same as tokenizers'
// BpeTrainer with min_frequency 2 learns), the vocabulary size, special tokens, refusals.
#include <gtest/gtest.h>

#include "data/bpe_tokenizer.h"
#include "data/builtin_corpus.h"
#include "data_test_support.h"
#include "framework/strict_json.h"

namespace ternion {
namespace {

using test::expect_error;
using Ids = std::vector<std::int32_t>;

std::string repeat(const std::string& text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += text;
  return out;
}

Json model_of(const BpeTokenizer& tokenizer) {
  std::string why;
  const std::optional<Json> file = parse_strict_json(tokenizer.to_json(), &why);
  EXPECT_TRUE(file.has_value()) << why;
  return file ? (*file)["model"] : Json();
}

TEST(BpeTrainer, LearnsTheMergesWorkedOutByHand) {
  // Words (one a line): hug x10, pug x5, pun x12, bun x4, hugs x5. Pair counts: ug 20, un 16,
  // pu 17, hu 15, gs 5, bu 4. Merged: u g (20); u n (16); h ug (15); p un (12); then p ug and
  // hug s tie at 5 (the smaller pair of ids, p's, first); b un (4). Nothing occurs twice then.
  const std::string text = repeat("hug\n", 10) + repeat("pug\n", 5) + repeat("pun\n", 12) +
                           repeat("bun\n", 4) + repeat("hugs\n", 5);
  const BpeTokenizer tokenizer = BpeTokenizer::train(text, 1000, {"<|endoftext|>"});
  const Json expected = Json::parse(R"([["u", "g"], ["u", "n"], ["h", "ug"], ["p", "un"],)"
                                          R"( ["p", "ug"], ["hug", "s"], ["b", "un"]])");
  const Json model = model_of(tokenizer);
  EXPECT_EQ(model["merges"], expected);
  EXPECT_EQ(tokenizer.vocab_size(), 1 + 256 + 7);
  // The special token first, then the bytes in the order of their code points ('!' first).
  EXPECT_EQ(model["vocab"]["<|endoftext|>"], 0);
  EXPECT_EQ(model["vocab"]["!"], 1);
  EXPECT_EQ(model["vocab"]["ug"], 257);
  EXPECT_EQ(tokenizer.encode("hugs\npun"),
            (Ids{262, 199, 260}));  // '\n' is byte 10 of those above U+00FF
}

TEST(BpeTrainer, FillsTheVocabulary) {
  const std::string text = builtin_corpus_text(200000);
  for (std::int64_t size : {257, 300, 1000}) {
    const BpeTokenizer tokenizer = BpeTokenizer::train(text, size, {"<|endoftext|>"});
    EXPECT_EQ(tokenizer.vocab_size(), size);
    EXPECT_EQ(model_of(tokenizer)["vocab"].size(), static_cast<std::size_t>(size));
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
  }
  // The bytes alone, no special token.
  EXPECT_EQ(BpeTokenizer::train(text, 256, {}).vocab_size(), 256);
}

TEST(BpeTrainer, CutsSpecialTokensOutOfTheText) {
  const std::string text = repeat("ab<|endoftext|>", 50) + repeat("<|pad|>", 50);
  const BpeTokenizer tokenizer = BpeTokenizer::train(text, 400, {"<|endoftext|>", "<|pad|>"});
  // Only "ab" occurs twice outside them.
  EXPECT_EQ(model_of(tokenizer)["merges"], Json::parse(R"([["a", "b"]])"));
  EXPECT_EQ(tokenizer.added_token_id("<|pad|>"), 1);
  EXPECT_EQ(tokenizer.encode("ab<|pad|><|endoftext|>"), (Ids{258, 1, 0}));
}

TEST(BpeTrainer, ItsFileReadsBackTheSame) {
  const std::string text = builtin_corpus_text(100000);
  const BpeTokenizer trained = BpeTokenizer::train(text, 500, {"<|endoftext|>"});
  const BpeTokenizer read = BpeTokenizer::from_json(trained.to_json(), "trained.json");
  EXPECT_EQ(read.to_json(), trained.to_json());
  EXPECT_EQ(read.encode(text), trained.encode(text));
}

TEST(BpeTrainer, RefusesWhatItCannotTrain) {
  expect_error<UsageError>(
      "small vocabulary", [] { BpeTokenizer::train("text", 256, {"<s>"}); },
      {"vocabulary size must be from 257 (256 bytes and 1 special tokens)", "got 256"});
  expect_error<UsageError>("empty special", [] { BpeTokenizer::train("text", 300, {""}); },
                           {"a special token is empty"});
  expect_error<UsageError>("special twice",
                           [] {
                             BpeTokenizer::train("text", 300, {"<s>", "<s>"});
                           },
                           {"special token '<s>' is given twice"});
  expect_error<DataError>("not UTF-8", [] { BpeTokenizer::train("ab\xff", 300, {}); },
                          {"not UTF-8 at byte offset 2"});
}

// Documents are counted each on its own: no piece spans two of them, and a special token's text
// inside one is learned from as text, as encode_placed then encodes it.
TEST(BpeTrainer, DocumentsAreCountedEachOnItsOwn) {
  std::vector<std::string> documents;
  for (int i = 0; i < 50; ++i) {
    documents.push_back("ab");
    documents.push_back("cd");
    documents.push_back("see <|endoftext|> here");
  }
  const BpeTokenizer tokenizer = BpeTokenizer::train(documents, 300, {"<|endoftext|>"});
  EXPECT_EQ(tokenizer.encode_placed("ab", {}).size(), 1u);
  EXPECT_EQ(tokenizer.encode_placed("cd", {}).size(), 1u);
  EXPECT_EQ(tokenizer.encode_placed("abcd", {}).size(), 2u) << "a piece across two documents";
  EXPECT_LE(tokenizer.encode_placed("see <|endoftext|> here", {}).size(), 6u)
      << "the special token's text, never learned from";
  // Trained on the documents joined by the special token, its text is cut out and not learned.
  std::string joined;
  for (const std::string& document : documents) joined += "<|endoftext|>" + document;
  const BpeTokenizer from_text = BpeTokenizer::train(joined, 300, {"<|endoftext|>"});
  EXPECT_GT(from_text.encode_placed("see <|endoftext|> here", {}).size(), 10u);
}

// Llama 3's style splits by its pattern (digits in threes) and puts <|begin_of_text|> before a text
// encoded with its special tokens; its file reads back the same. (tests/data/bpe/bpe_hf_compare.py:
// the merges tokenizers learns.)
TEST(BpeTrainer, Llama3StyleSplitsItsWayAndBeginsATextWithItsMarker) {
  const std::string text = repeat("1234567 (hello) 1234567 (hello) ", 20);
  const std::vector<std::string> specials = {"<|begin_of_text|>", "<|end_of_text|>"};
  using Style = BpeTokenizer::Style;
  const BpeTokenizer llama = BpeTokenizer::train(text, 400, specials, Style::llama3);
  const BpeTokenizer gpt2 = BpeTokenizer::train(text, 400, specials);
  const Ids digits = llama.encode("1234567");
  ASSERT_EQ(digits.size(), 3u);  // 123 456 7
  EXPECT_EQ(llama.decode({digits.data(), 1}), "123");
  EXPECT_EQ(gpt2.encode("1234567").size(), 1u);
  EXPECT_EQ(llama.decode({llama.encode(" (hello)").data(), 1}), " (");
  const std::int32_t begin = llama.added_token_id("<|begin_of_text|>");
  Ids with_marker = {begin};
  for (std::int32_t id : llama.encode("(hello)")) with_marker.push_back(id);
  EXPECT_EQ(llama.encode_with_special_tokens("(hello)"), with_marker);
  EXPECT_EQ(gpt2.encode_with_special_tokens("(hello)"), gpt2.encode("(hello)"));
  const BpeTokenizer read_back = BpeTokenizer::from_json(llama.to_json(), "llama.json");
  std::string why;
  EXPECT_EQ(parse_strict_json(read_back.to_json(), &why), parse_strict_json(llama.to_json(), &why));
  EXPECT_EQ(read_back.encode_with_special_tokens("1234567 (hello)"),
            llama.encode_with_special_tokens("1234567 (hello)"));
  expect_error<UsageError>(
      "no marker", [] { BpeTokenizer::train("abc abc", 300, {"<|end_of_text|>"}, Style::llama3); },
      {"a Llama 3-style tokenizer needs the special token <|begin_of_text|>"});
}

}  // namespace
}  // namespace ternion
