// Tokenizer, the run's bytes-or-BPE: ids it has no token for decode visibly, never throw; the
// prompt checks of both kinds.
#include "data/tokenizer.h"

#include <gtest/gtest.h>

#include "data/byte_level.h"
#include "data_test_support.h"
#include "framework/strict_json.h"

namespace ternion {
namespace {

// A small trained BPE with one more vocabulary token, "zzq", 5 ids past the rest: ids in
// between have no token.
Tokenizer tokenizer_with_a_gap() {
  const BpeTokenizer trained = BpeTokenizer::train(
      "the cat sat on the mat; the cat ate the rat. ", 270, {"<|endoftext|>"});
  Json file = Json::parse(trained.to_json());
  file["model"]["vocab"]["zzq"] = trained.vocab_size() + 5;
  return Tokenizer(BpeTokenizer::from_json(file.dump(), "gap.json"));
}

TEST(Tokenizer, IdsWithoutATokenDecodeAsTheirNumbers) {
  const Tokenizer tokenizer = tokenizer_with_a_gap();
  const std::int64_t vocab = tokenizer.vocab_size();
  const std::int32_t gap = static_cast<std::int32_t>(vocab - 3);
  std::vector<std::int32_t> ids = tokenizer.encode("the cat");
  ids.push_back(gap);
  ids.push_back(static_cast<std::int32_t>(vocab + 10));  // past the vocabulary: a padded model
  ids.push_back(static_cast<std::int32_t>(vocab - 1));
  EXPECT_EQ(tokenizer.decode(ids), "the cat<" + std::to_string(gap) + "><" +
                                       std::to_string(vocab + 10) + ">zzq");
  EXPECT_EQ(Tokenizer::bytes().decode(std::vector<std::int32_t>{72, 105, 300}), "Hi<300>");
}

TEST(Tokenizer, PromptProblems) {
  const Tokenizer bpe = tokenizer_with_a_gap();
  EXPECT_EQ(bpe.prompt_problem("the cat", bpe.vocab_size()), "");
  EXPECT_NE(bpe.prompt_problem("the \xff", bpe.vocab_size()).find("not UTF-8 (byte 4)"),
            std::string::npos);
  EXPECT_NE(bpe.prompt_problem("<|endoftext|>", 0).find("token 0, outside the model's"),
            std::string::npos);
  EXPECT_NE(Tokenizer::bytes().prompt_problem("z", 100).find("0x7A"), std::string::npos);
  EXPECT_EQ(Tokenizer::bytes().describe(), "bytes (256 tokens)");
  EXPECT_EQ(bpe.describe(), "byte-level BPE (" + std::to_string(bpe.vocab_size()) + " tokens)");
}

// Bytes the tokenizer has no token for are dropped (or read as unk_token), so the model would
// continue a prompt other than the one printed: refused, naming the first; a prompt of such
// bytes alone encodes to no tokens at all.
TEST(Tokenizer, PromptBytesWithoutATokenAreRefused) {
  const BpeTokenizer trained = BpeTokenizer::train("the cat sat on the mat. ", 262, {});
  Json file = Json::parse(trained.to_json());
  const std::string lead = byte_level::to_text("\xCE"), trail = byte_level::to_text("\xA9");
  const std::int64_t lead_id = file["model"]["vocab"][lead];
  file["model"]["vocab"].erase(lead);
  file["model"]["vocab"].erase(trail);
  const Tokenizer dropping(BpeTokenizer::from_json(file.dump(), "partial.json"));
  const std::int64_t vocab = dropping.vocab_size();
  EXPECT_EQ(dropping.prompt_problem("the cat", vocab), "");
  const std::string dropped =
      "the prompt's byte 4 (0xCE) has no token in the tokenizer, which drops it or reads it as "
      "unk_token: the model would continue a prompt other than the one given";
  EXPECT_EQ(dropping.prompt_problem("the \xCE\xA9 cat", vocab), dropped);
  EXPECT_EQ(dropping.prompt_problem("\xCE\xA9", vocab),
            "the prompt encodes to no tokens: the tokenizer has no token for its byte 0 (0xCE), "
            "and a sample continues at least one token");
  file["model"]["vocab"]["<unk>"] = lead_id;
  file["model"]["unk_token"] = "<unk>";
  const Tokenizer unknown(BpeTokenizer::from_json(file.dump(), "unk.json"));
  EXPECT_EQ(unknown.prompt_problem("the \xCE\xA9 cat", vocab), dropped);
  EXPECT_EQ(unknown.prompt_problem("the cat", vocab), "");
}

// The document separator is found by its text, GPT-2's or Llama 3's; a tokenizer of Llama 3's
// kind starts documents with its own begin-of-text token, GPT-2's with the separator.
TEST(Tokenizer, EndOfTextIsGpt2sOrLlama3sToken) {
  EXPECT_EQ(Tokenizer::bytes().end_of_text(), "");
  EXPECT_EQ(Tokenizer::bytes().end_of_text_id(), -1);
  EXPECT_EQ(Tokenizer::bytes().begin_of_text_id(), -1);

  const Tokenizer gpt2(BpeTokenizer::train("the cat sat. ", 262, {"<|endoftext|>"}));
  const BpeTokenizer& gpt2_kind = *gpt2.bpe();
  EXPECT_EQ(gpt2.end_of_text(), "<|endoftext|>");
  EXPECT_EQ(gpt2.end_of_text_id(), gpt2_kind.added_token_id("<|endoftext|>"));
  EXPECT_EQ(gpt2.begin_of_text_id(), gpt2.end_of_text_id());

  const Tokenizer llama(BpeTokenizer::train(
      "the cat sat. ", 264, {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"}));
  const BpeTokenizer& llama_kind = *llama.bpe();
  EXPECT_EQ(llama.end_of_text(), "<|end_of_text|>");
  EXPECT_EQ(llama.end_of_text_id(), llama_kind.added_token_id("<|end_of_text|>"));
  EXPECT_EQ(llama.begin_of_text_id(), llama_kind.added_token_id("<|begin_of_text|>"));
  EXPECT_NE(llama.begin_of_text_id(), llama.end_of_text_id());

  const Tokenizer none(BpeTokenizer::train("the cat sat. ", 262, {"<|eot_id|>"}));
  EXPECT_EQ(none.end_of_text(), "");
  EXPECT_EQ(none.end_of_text_id(), -1);
  EXPECT_EQ(none.begin_of_text_id(), -1);
}

// A prompt starts as a document does: after Llama 3's <|begin_of_text|> where the file's
// template adds it (transformers' tokenizer(prompt)); GPT-2's files and bytes add nothing.
TEST(Tokenizer, APromptTakesTheTemplatesTokens) {
  const BpeTokenizer trained =
      BpeTokenizer::train("the cat sat. ", 264, {"<|begin_of_text|>", "<|end_of_text|>"});
  const std::int32_t begin = trained.added_token_id("<|begin_of_text|>");
  const Tokenizer gpt2_kind(BpeTokenizer::from_json(trained.to_json(), "gpt2_kind.json"));
  EXPECT_EQ(gpt2_kind.encode_prompt("the cat"), gpt2_kind.encode("the cat"));
  EXPECT_EQ(Tokenizer::bytes().encode_prompt("hi"), Tokenizer::bytes().encode("hi"));

  Json file = Json::parse(trained.to_json());
  file["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", Json::array({{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"pair", Json::array()},
      {"special_tokens",
       {{"<|begin_of_text|>",
         {{"id", "<|begin_of_text|>"}, {"ids", {begin}}, {"tokens", {"<|begin_of_text|>"}}}}}}};
  const Tokenizer llama(BpeTokenizer::from_json(file.dump(), "llama.json"));
  std::vector<std::int32_t> expected = {begin};
  for (std::int32_t id : llama.encode("the cat")) expected.push_back(id);
  EXPECT_EQ(llama.encode_prompt("the cat"), expected);
  EXPECT_EQ(llama.prompt_problem("the cat", llama.vocab_size()), "");
  // An empty prompt starts a document where the template begins one, as generate does from it.
  EXPECT_EQ(llama.encode_prompt(""), std::vector<std::int32_t>{begin});
  EXPECT_EQ(llama.prompt_problem("", llama.vocab_size()), "");
  EXPECT_EQ(gpt2_kind.prompt_problem("", gpt2_kind.vocab_size()),
            "the prompt is empty: a sample continues at least one token");
  // The template's token counts against the model's vocabulary as the text's do.
  const std::int32_t last = static_cast<std::int32_t>(llama.vocab_size() - 1);
  Json late = file;
  late["post_processor"]["special_tokens"]["<|begin_of_text|>"]["ids"] = {last};
  const Tokenizer far(BpeTokenizer::from_json(late.dump(), "late.json"));
  ASSERT_LT(far.encode("x").at(0), last);
  EXPECT_EQ(far.prompt_problem("x", last), "the prompt encodes to token " + std::to_string(last) +
                                               ", outside the model's vocabulary of " +
                                               std::to_string(last));
  EXPECT_EQ(far.prompt_problem("x", last + 1), "");
}

}  // namespace
}  // namespace ternion
