// BpeTokenizer: hand-made tokenizer.json files against the ids tokenizers 0.23 gives for them
// (computed once with it; tests/data/bpe/bpe_hf_compare.py compares whole corpora), decoding,
// every refusal, thread counts, and writing the file back.
#include "data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "data/bpe_regex.h"
#include "data/builtin_corpus.h"
#include "data/byte_level.h"
#include "data_test_support.h"
#include "framework/strict_json.h"

namespace ternion {
namespace {

using test::expect_error;
using Ids = std::vector<std::int32_t>;

std::string text_of_byte(int b) {
  return byte_level::to_text(std::string(1, static_cast<char>(b)));
}

// Byte b has id b; the merges below make ids 256, 257, ... in order.
Json small_tokenizer() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[text_of_byte(b)] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"},  {"h", "e"}, {"Ġt", "he"}, {"l", "l"},   {"ll", "o"}, {"e", "l"}, {"Ġ", "h"},
      {"Ġh", "e"}, {"'", "s"}, {"Ġ", "Ġ"},   {"ĠĠ", "ĠĠ"}, {"Ċ", "Ċ"},  {"1", "2"}, {"12", "3"}};
  Json merge_list = Json::array();
  for (const auto& [a, b] : merges) {
    vocab[a + b] = static_cast<int>(vocab.size());
    merge_list.push_back({a, b});
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", Json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"},
            {"add_prefix_space", false},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}

Json added_token(int id, const std::string& content, bool special, bool normalized) {
  return {{"id", id},        {"content", content},       {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", normalized}, {"special", special}};
}

Json llama_pre_tokenizer(const std::string& pattern) {
  const Json split = {{"type", "Split"},
                      {"pattern", Json::object({{"Regex", pattern}})},
                      {"behavior", "Isolated"},
                      {"invert", false}};
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", false}};
  return {{"type", "Sequence"}, {"pretokenizers", Json::array({split, byte_level})}};
}

BpeTokenizer load(const Json& file) { return BpeTokenizer::from_json(file.dump(), "small.json"); }

TEST(BpeTokenizer, EncodesAsTokenizersDoes) {
  Json file = small_tokenizer();
  file["added_tokens"].push_back(added_token(270, "<|endoftext|>", true, false));
  const BpeTokenizer tokenizer = load(file);
  EXPECT_EQ(tokenizer.encode("the hello"), (Ids{116, 257, 32, 257, 260}));
  EXPECT_EQ(tokenizer.encode("Hello's  world\n\n"),
            (Ids{72, 101, 260, 264, 32, 32, 119, 111, 114, 108, 100, 267}));
  EXPECT_EQ(tokenizer.encode("    x"), (Ids{265, 32, 32, 120}));
  EXPECT_EQ(tokenizer.encode("123456 1 12"), (Ids{269, 52, 53, 54, 32, 49, 32, 268}));
  EXPECT_EQ(tokenizer.encode("<|endoftext|>the<|endoftext|>"), (Ids{270, 116, 257, 270}));
  EXPECT_TRUE(tokenizer.encode("").empty());
  EXPECT_EQ(tokenizer.vocab_size(), 271);
  EXPECT_EQ(tokenizer.added_token_id("<|endoftext|>"), 270);
  EXPECT_EQ(tokenizer.added_token_id("<|nothing|>"), -1);
}

TEST(BpeTokenizer, IgnoreMergesTakesAWholeVocabularyPiece) {
  Json file = small_tokenizer();
  file["pre_tokenizer"] = llama_pre_tokenizer(kLlama3Pattern);
  file["model"]["vocab"]["Ġhello"] = 270;  // no merge makes it
  EXPECT_EQ(load(file).encode("the hello 123456"),
            (Ids{116, 257, 32, 257, 260, 32, 269, 52, 53, 54}));
  file["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(file).encode("the hello 123456"), (Ids{116, 257, 270, 32, 269, 52, 53, 54}));
}

TEST(BpeTokenizer, AddedTokensRawFirstThenNormalizedLeftmostLongest) {
  Json file = small_tokenizer();
  file["added_tokens"] = Json::array(
      {added_token(270, "<|endoftext|>", true, false), added_token(271, "ext|>mo", false, true),
       added_token(272, "hello wor", false, true), added_token(273, "<|end", true, false)});
  const BpeTokenizer tokenizer = load(file);
  // "<|endoftext|>" (raw) wins over "ext|>mo" (normalized) though the latter would end later,
  // and over its own prefix "<|end" (longest).
  EXPECT_EQ(tokenizer.encode("<|endoftext|>more"), (Ids{270, 109, 111, 114, 101}));
  EXPECT_EQ(tokenizer.encode("say hello world"), (Ids{115, 97, 121, 32, 272, 108, 100}));
  const std::string text = "x<|endoftext|>ext|>more<|end";
  const Ids ids = tokenizer.encode(text);
  EXPECT_EQ(ids, (Ids{120, 270, 271, 114, 101, 273}));
  EXPECT_EQ(tokenizer.decode(ids), text);
}

TEST(BpeTokenizer, MissingBytesAreDroppedOrUnknown) {
  // tokenizers drops a byte the vocabulary lacks; with unk_token it becomes that token, runs
  // of them one token with fuse_unk.
  Json file = small_tokenizer();
  file["model"]["vocab"].erase(text_of_byte(0xC3));
  file["model"]["vocab"]["<unk>"] = 0xC3;
  const std::string text = "a\xc3\xa9\xc3\xa9 b";
  EXPECT_EQ(load(file).encode(text), (Ids{97, 0xA9, 0xA9, 32, 98}));
  file["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(load(file).encode(text), (Ids{97, 0xC3, 0xA9, 0xC3, 0xA9, 32, 98}));
  file["model"]["vocab"].erase(text_of_byte(0xA9));
  file["model"]["vocab"]["<other>"] = 0xA9;
  EXPECT_EQ(load(file).encode(text), (Ids{97, 0xC3, 0xC3, 0xC3, 0xC3, 32, 98}));
  file["model"]["fuse_unk"] = true;
  EXPECT_EQ(load(file).encode(text), (Ids{97, 0xC3, 32, 98}));
}

TEST(BpeTokenizer, LegacyMergesAndLaterDuplicatesAsTokenizers) {
  Json file = small_tokenizer();
  Json legacy = Json::array({"#version: 0.2"});
  for (const Json& merge : file["model"]["merges"])
    legacy.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
  file["model"]["merges"] = legacy;
  EXPECT_EQ(load(file).encode("the hello"), (Ids{116, 257, 32, 257, 260}));
  EXPECT_EQ(load(file).encode("ello"), (Ids{101, 260}));  // ("l", "l") before ("e", "l")
  // ("l", "l") listed again at the end: its later rank counts, after ("e", "l").
  file["model"]["merges"].push_back("l l");
  EXPECT_EQ(load(file).encode("ello"), (Ids{261, 108, 111}));
}

const std::string kTricky =
    "DON'T we'LL \xe2\x80\x99s \xe4\xb8\xad\xe6\x96\x87\xe5\x8f\xa5\xe5\xad\x90 "
    "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 "
    "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 e\xcc\x81 "
    "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 "
    "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd "
    "1234567  \t\t\r\n\r\n\xc2\xa0\xe2\x80\xa8\xe3\x80\x80\xe1\xa0\x8e\xc2\x85\x0b\x0c "
    "<|endoftext|>x\x01\x7f   ";

TEST(BpeTokenizer, DecodeGivesTheTextBack) {
  const BpeTokenizer tokenizer =
      BpeTokenizer::train(builtin_corpus_text(50000) + kTricky, 400, {"<|endoftext|>"});
  for (const std::string& text :
       {kTricky, std::string("plain words"), std::string(" "), builtin_corpus_text(3000)}) {
    const Ids ids = tokenizer.encode(text);
    EXPECT_EQ(tokenizer.decode(ids), text);
  }
  EXPECT_EQ(tokenizer.decode(Ids{0}), "<|endoftext|>");
  // Ids may split a character: the bytes come out as they are, not replaced.
  const Ids ids = tokenizer.encode("\xe4\xb8\xad");
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(tokenizer.decode(Ids{ids[0]}), "\xe4");
  expect_error<DataError>("id out of range",
                          [&] {
                            tokenizer.decode(Ids{65, 400});
                          },
                          {"tokenizer 'trained'", "id 400 is not in the vocabulary (400 ids)"});
  expect_error<DataError>("negative id", [&] { tokenizer.decode(Ids{-1}); }, {"id -1"});
}

TEST(BpeTokenizer, RefusesTextThatIsNotUtf8WithItsOffset) {
  const BpeTokenizer tokenizer = load(small_tokenizer());
  const std::vector<std::pair<std::string, std::int64_t>> cases = {
      {"ab\xff", 2},         {"ab\xc3", 2},           {"\xc0\xaf", 0},     {"a\xe0\x80\xaf", 1},
      {"ok\xed\xa0\x80", 2}, {"\xf4\x90\x80\x80", 0}, {"\xf0\x9f\x98", 0}, {"abc\x80", 3}};
  for (const auto& [bad_text, offset] : cases) {
    const std::string& text = bad_text;  // clang before 16 cannot capture a structured binding
    EXPECT_EQ(first_invalid_utf8(text), offset);
    expect_error<DataError>("offset " + std::to_string(offset), [&] { tokenizer.encode(text); },
                            {"small.json", "not UTF-8 at byte offset " + std::to_string(offset)});
  }
  EXPECT_EQ(first_invalid_utf8("\xf4\x8f\xbf\xbf \xed\x9f\xbf \xc2\x80 plain ascii text here"), -1);
}

// Every refusal, each with the field its message names.
TEST(BpeTokenizer, RefusesWhatItCannotEncodeAsTokenizers) {
  struct Case {
    std::string label;
    std::function<void(Json&)> change;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {"model type",
       [](Json& f) { f["model"]["type"] = "WordPiece"; },
       {"small.json", "model.type: 'WordPiece' is not supported"}},
      {"normalizer",
       [](Json& f) {
         f["normalizer"] = {{"type", "NFC"}};
       },
       {"normalizer: must be null"}},
      // Real WordPiece and SentencePiece-style files have a normalizer too: their kind is named.
      {"WordPiece with its normalizer",
       [](Json& f) {
         f["model"]["type"] = "WordPiece";
         f["normalizer"] = {{"type", "BertNormalizer"}};
       },
       {"model.type: 'WordPiece' is not supported (this reader takes byte-level BPE)"}},
      {"byte fallback with a normalizer",
       [](Json& f) {
         f["model"]["byte_fallback"] = true;
         f["normalizer"] = {{"type", "Replace"}};
       },
       {"model.byte_fallback: must be false: a BPE with byte fallback (SentencePiece's"}},
      {"truncation",
       [](Json& f) {
         f["truncation"] = {{"max_length", 5}};
       },
       {"truncation: must be null"}},
      {"lstrip",
       [](Json& f) {
         f["added_tokens"] = Json::array({added_token(270, "<s>", true, false)});
         f["added_tokens"][0]["lstrip"] = true;
       },
       {"added_tokens[0].lstrip: must be false"}},
      {"single_word",
       [](Json& f) {
         f["added_tokens"] = Json::array({added_token(270, "<s>", true, false)});
         f["added_tokens"][0]["single_word"] = true;
       },
       {"added_tokens[0].single_word: must be false"}},
      {"added id",
       [](Json& f) { f["added_tokens"] = Json::array({added_token(300, "<s>", true, false)}); },
       {"added_tokens[0].id: 300 for '<s>', but tokenizers gives it 270"}},
      {"added twice",
       [](Json& f) {
         f["added_tokens"] = Json::array(
             {added_token(270, "<s>", true, false), added_token(271, "<s>", true, false)});
       },
       {"added_tokens[1].content: '<s>' is also added_tokens[0]"}},
      // tokenizers requires both flags.
      {"added token without normalized",
       [](Json& f) {
         f["added_tokens"] = Json::array({added_token(270, "<s>", true, false)});
         f["added_tokens"][0].erase("normalized");
       },
       {"added_tokens[0].normalized: missing"}},
      // "é" is also the byte-level token of the byte E9: id 233 would decode as either.
      {"added token that is a byte's token",
       [](Json& f) {
         f["added_tokens"] = Json::array({added_token(233, text_of_byte(0xE9), false, true)});
       },
       {"added_tokens[0].content: '\xc3\xa9' is also the model's token for other bytes"}},
      {"unknown merge symbol",
       [](Json& f) {
         f["model"]["merges"].push_back({"zz", "t"});
       },
       {"model.merges[14]: 'zz' (its left part) is not in the vocabulary"}},
      {"merge result missing",
       [](Json& f) {
         f["model"]["merges"].push_back({"a", "b"});
       },
       {"model.merges[14]: 'ab' (what it makes) is not in the vocabulary"}},
      {"merge with two spaces",
       [](Json& f) { f["model"]["merges"] = Json::array({"a b c"}); },
       {"model.merges[0]: expected \"LEFT RIGHT\""}},
      {"mixed merges",
       [](Json& f) { f["model"]["merges"].push_back("h e"); },
       {"model.merges[14]: mixes the two forms"}},
      {"duplicate id",
       [](Json& f) { f["model"]["vocab"]["extra"] = 5; },
       {"model.vocab:", "both have id 5"}},
      {"negative id",
       [](Json& f) { f["model"]["vocab"]["extra"] = -1; },
       {"model.vocab.extra: expected an id"}},
      {"sparse ids",
       [](Json& f) { f["model"]["vocab"]["extra"] = 100000; },
       {"model.vocab: ids reach 100000 for 271 tokens"}},
      {"dropout", [](Json& f) { f["model"]["dropout"] = 0.1; }, {"model.dropout: must be null"}},
      {"byte fallback",
       [](Json& f) { f["model"]["byte_fallback"] = true; },
       {"model.byte_fallback: must be false"}},
      {"subword prefix",
       [](Json& f) { f["model"]["continuing_subword_prefix"] = "##"; },
       {"model.continuing_subword_prefix: must be null"}},
      {"unknown unk",
       [](Json& f) { f["model"]["unk_token"] = "<unk>"; },
       {"model.unk_token: '<unk>' is not in the vocabulary"}},
      {"unknown model key",
       [](Json& f) { f["model"]["max_length"] = 3; },
       {"model.max_length: unknown key"}},
      {"unknown top key", [](Json& f) { f["extra"] = 1; }, {"extra: unknown key"}},
      {"prefix space",
       [](Json& f) { f["pre_tokenizer"]["add_prefix_space"] = true; },
       {"pre_tokenizer.add_prefix_space: must be false"}},
      {"no regex",
       [](Json& f) { f["pre_tokenizer"]["use_regex"] = false; },
       {"pre_tokenizer.use_regex: must be true"}},
      {"no pre-tokenizer",
       [](Json& f) { f["pre_tokenizer"] = nullptr; },
       {"pre_tokenizer: missing"}},
      {"whitespace pre-tokenizer",
       [](Json& f) {
         f["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       {"pre_tokenizer.type: 'Whitespace' is not supported"}},
      {"split behavior",
       [](Json& f) {
         f["pre_tokenizer"] = llama_pre_tokenizer(kLlama3Pattern);
         f["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
       },
       {"pre_tokenizer.pretokenizers[0].behavior: only Isolated is supported"}},
      {"split pattern string",
       [](Json& f) {
         f["pre_tokenizer"] = llama_pre_tokenizer(kLlama3Pattern);
         f["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}};
       },
       {"pre_tokenizer.pretokenizers[0].pattern: expected {\"Regex\": PATTERN}"}},
      {"regex after split",
       [](Json& f) {
         f["pre_tokenizer"] = llama_pre_tokenizer(kLlama3Pattern);
         f["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
       },
       {"pre_tokenizer.pretokenizers[1].use_regex: must be false"}},
      {"word pattern",
       [](Json& f) { f["pre_tokenizer"] = llama_pre_tokenizer("\\w+"); },
       {"pre-tokenizer pattern: \\w is not supported"}},
      {"decoder",
       [](Json& f) {
         f["decoder"] = {{"type", "WordPiece"}};
       },
       {"decoder.type: 'WordPiece' is not supported"}},
      {"post-processor",
       [](Json& f) {
         f["post_processor"] = {{"type", "BertProcessing"}};
       },
       {"post_processor.type: 'BertProcessing' is not supported"}},
      {"version", [](Json& f) { f["version"] = "2.0"; }, {"version: expected \"1.0\""}},
  };
  for (const Case& c : cases) {
    Json file = small_tokenizer();
    c.change(file);
    expect_error<DataError>(
        c.label, [&] { load(file); }, c.message);
  }
  expect_error<DataError>(
      "duplicate key",
      [] { BpeTokenizer::from_json(R"({"version": "1.0", "version": "1.0"})", "twice.json"); },
      {"tokenizer 'twice.json': not valid JSON", "key 'version' appears twice"});
  expect_error<DataError>("not JSON", [] { BpeTokenizer::from_json("{", "broken.json"); },
                          {"tokenizer 'broken.json': not valid JSON"});
  expect_error<DataError>("no file", [] { BpeTokenizer::load("/nonexistent/tokenizer.json"); },
                          {"cannot read tokenizer '/nonexistent/tokenizer.json'"});
  expect_error<DataError>("a directory", [] { BpeTokenizer::load("/tmp"); },
                          {"cannot read tokenizer '/tmp': is a directory"});
}

// A byte order mark is not JSON: tokenizers refuses such a file, and so does this reader.
TEST(BpeTokenizer, RefusesAByteOrderMark) {
  test::expect_error<DataError>(
      "BOM", [] { BpeTokenizer::from_json("\xEF\xBB\xBF" + small_tokenizer().dump(), "bom.json"); },
      {"tokenizer 'bom.json': starts with a byte order mark"});
}

// Llama 3's post-processor: ByteLevel, then <|begin_of_text|> before each text.
Json llama3_post_processor(int begin_id) {
  const Json begin = {{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}};
  const Json text = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const Json second = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
  const Json processor = {
      {"type", "TemplateProcessing"},
      {"single", Json::array({begin, text})},
      {"pair", Json::array({begin, text, begin, second})},
      {"special_tokens",
       {{"<|begin_of_text|>",
         {{"id", "<|begin_of_text|>"}, {"ids", {begin_id}}, {"tokens", {"<|begin_of_text|>"}}}}}}};
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", true},
                           {"trim_offsets", false},
                           {"use_regex", true}};
  return {{"type", "Sequence"}, {"processors", Json::array({byte_level, processor})}};
}

TEST(BpeTokenizer, AcceptsWhatTokenizersWritesForGpt2AndLlama3) {
  Json file = small_tokenizer();
  // GPT-2's own file: empty affixes, a ByteLevel post-processor; Llama 3's: a Sequence of
  // post-processors with a template.
  file["model"]["continuing_subword_prefix"] = "";
  file["model"]["end_of_word_suffix"] = "";
  file["model"].erase("byte_fallback");
  file["model"].erase("ignore_merges");
  file["post_processor"] = {{"type", "ByteLevel"}};
  EXPECT_EQ(load(file).encode("the hello"), (Ids{116, 257, 32, 257, 260}));
  EXPECT_EQ(load(file).encode_with_special_tokens("the hello"), (Ids{116, 257, 32, 257, 260}));
  file["added_tokens"].push_back(added_token(270, "<|begin_of_text|>", true, false));
  file["post_processor"] = llama3_post_processor(270);
  EXPECT_EQ(load(file).encode("the hello"), (Ids{116, 257, 32, 257, 260}));
}

// add_special_tokens=True in tokenizers 0.23: the template's ids around the text's, whatever the
// text holds (an empty one, the marker's own text); written back, the file does the same.
TEST(BpeTokenizer, WithSpecialTokensTheTemplateGoesAroundTheText) {
  Json file = small_tokenizer();
  file["added_tokens"] = Json::array({added_token(270, "<|begin_of_text|>", true, false),
                                      added_token(271, "<|end_of_text|>", true, false)});
  file["post_processor"] = llama3_post_processor(270);
  const BpeTokenizer llama = load(file);
  EXPECT_EQ(llama.encode_with_special_tokens("the hello"), (Ids{270, 116, 257, 32, 257, 260}));
  EXPECT_EQ(llama.encode_with_special_tokens(""), (Ids{270}));
  EXPECT_EQ(llama.encode_with_special_tokens("<|begin_of_text|>x"), (Ids{270, 270, 120}));
  std::string why;
  EXPECT_EQ(load(*parse_strict_json(llama.to_json(), &why)).encode_with_special_tokens("x"),
            (Ids{270, 120}));
  // A template may add several ids, after the text too (an end-of-text template, say).
  Json& processor = file["post_processor"]["processors"][1];
  processor["single"].push_back({{"SpecialToken", {{"id", "end"}, {"type_id", 0}}}});
  processor["special_tokens"]["end"] = {{"id", "end"}, {"ids", {271, 120}}, {"tokens", {"a", "b"}}};
  EXPECT_EQ(load(file).encode_with_special_tokens("x"), (Ids{270, 120, 271, 120}));
  EXPECT_EQ(load(small_tokenizer()).encode_with_special_tokens("x"), (Ids{120}));
}

TEST(BpeTokenizer, RefusesATemplateItCannotApply) {
  struct Case {
    const char* label;
    std::function<void(Json&)> change;  // of the TemplateProcessing
    std::vector<std::string> message;
  };
  const std::string at = "tokenizer 'small.json': post_processor.processors[1].";
  const std::vector<Case> cases = {
      {"no single", [](Json& t) { t.erase("single"); }, {at + "single: expected a list"}},
      {"no special tokens",
       [](Json& t) { t.erase("special_tokens"); },
       {at + "special_tokens: expected an object"}},
      {"no text",
       [](Json& t) { t["single"].erase(1); },
       {at + "single: has no {\"Sequence\": {\"id\": \"A\"}}"}},
      {"text twice",
       [](Json& t) { t["single"].push_back(t["single"][1]); },
       {at + "single[2]: a second Sequence"}},
      {"second text in single",
       [](Json& t) { t["single"][1]["Sequence"]["id"] = "B"; },
       {at + "single[1].Sequence.id: expected \"A\""}},
      {"unknown item",
       [](Json& t) {
         t["single"][0] = {{"Token", 3}};
       },
       {at + "single[0]: expected {\"SpecialToken\": ...} or {\"Sequence\": ...}"}},
      {"unnamed special",
       [](Json& t) { t["single"][0]["SpecialToken"]["id"] = "<s>"; },
       {at + "single[0].SpecialToken.id: '<s>' is not in " +
        "post_processor.processors[1].special_tokens"}},
      {"ids not a list",
       [](Json& t) { t["special_tokens"]["<|begin_of_text|>"]["ids"] = 270; },
       {at + "special_tokens.<|begin_of_text|>.ids: expected a list of ids"}},
      {"negative id",
       [](Json& t) { t["special_tokens"]["<|begin_of_text|>"]["ids"] = {-1}; },
       {at + "special_tokens.<|begin_of_text|>.ids[0]: expected an id"}},
      {"unknown key", [](Json& t) { t["extra"] = 1; }, {at + "extra: unknown key"}},
      // What tokenizers 0.23 refuses too: the file would not load there.
      {"no pair", [](Json& t) { t.erase("pair"); }, {at + "pair: expected a list"}},
      {"third text in pair",
       [](Json& t) { t["pair"][3]["Sequence"]["id"] = "C"; },
       {at + "pair[3].Sequence.id: expected \"A\" or \"B\", got 'C'"}},
      {"no type id",
       [](Json& t) { t["single"][0]["SpecialToken"].erase("type_id"); },
       {at + "single[0].SpecialToken.type_id: expected a whole number from 0, got nothing"}},
      {"text type id",
       [](Json& t) { t["single"][1]["Sequence"]["type_id"] = "0"; },
       {at + "single[1].Sequence.type_id: expected a whole number from 0"}},
      {"no tokens",
       [](Json& t) { t["special_tokens"]["<|begin_of_text|>"].erase("tokens"); },
       {at + "special_tokens.<|begin_of_text|>.tokens: expected a list of token texts"}},
      {"entry without id",
       [](Json& t) { t["special_tokens"]["<|begin_of_text|>"].erase("id"); },
       {at + "special_tokens.<|begin_of_text|>.id: missing"}},
  };
  for (const Case& c : cases) {
    Json file = small_tokenizer();
    file["added_tokens"].push_back(added_token(270, "<|begin_of_text|>", true, false));
    file["post_processor"] = llama3_post_processor(270);
    c.change(file["post_processor"]["processors"][1]);
    expect_error<DataError>(
        c.label, [&] { load(file); }, c.message);
  }
  Json file = small_tokenizer();
  file["post_processor"] = llama3_post_processor(270);
  expect_error<DataError>(
      "id without a token", [&] { load(file); },
      {"tokenizer 'small.json': post_processor: the template adds id 270, which no token"});
  file["post_processor"]["processors"][0] = file["post_processor"]["processors"][1];
  expect_error<DataError>("two templates", [&] { load(file); },
                          {"post_processor.processors[1]: a second TemplateProcessing"});
}

// A text that crosses every chunk boundary in awkward places: a long run of spaces, a run of
// digits Llama 3's pattern cuts in threes (a thread starting inside it cuts it differently all
// along, so its pieces are redone), added tokens, multi-byte characters.
std::string awkward_text() {
  std::string text = builtin_corpus_text(300000);
  text += std::string(150000, ' ') + "x";
  for (int i = 0; i < 40000; ++i) text += static_cast<char>('0' + i % 10);
  for (int i = 0; i < 2000; ++i) text += kTricky;
  text += builtin_corpus_text(100000) + "<|endoftext|>" + std::string(70000, '\n');
  return text;
}

TEST(BpeTokenizer, IdsAreTheSameForAnyThreadCount) {
  const std::string text = awkward_text();
  const BpeTokenizer gpt2 =
      BpeTokenizer::train(text.substr(0, 400000) + kTricky, 700, {"<|endoftext|>"});
  std::string why;
  std::optional<Json> llama_file = parse_strict_json(gpt2.to_json(), &why);
  ASSERT_TRUE(llama_file.has_value()) << why;
  (*llama_file)["pre_tokenizer"] = llama_pre_tokenizer(kLlama3Pattern);
  (*llama_file)["model"]["ignore_merges"] = true;
  const BpeTokenizer llama = load(*llama_file);
  for (const BpeTokenizer* tokenizer : {&gpt2, &llama}) {
    const Ids one = tokenizer->encode(text, 1);
    EXPECT_EQ(tokenizer->decode(one), text);
    for (int threads : {2, 3, 4, 7, 16})
      EXPECT_EQ(tokenizer->encode(text, threads), one) << threads << " threads";
  }
}

TEST(BpeTokenizer, WritesAFileThatReadsBackTheSame) {
  test::TempDir dir;
  Json file = small_tokenizer();
  file["pre_tokenizer"] = llama_pre_tokenizer(kLlama3Pattern);
  file["model"]["ignore_merges"] = true;
  file["added_tokens"] = Json::array(
      {added_token(270, "<|endoftext|>", true, false), added_token(271, "hello wor", false, true)});
  const BpeTokenizer tokenizer = load(file);
  const std::string path = dir.file("tokenizer.json");
  tokenizer.save(path);
  const BpeTokenizer again = BpeTokenizer::load(path);
  EXPECT_EQ(again.to_json(), tokenizer.to_json());
  EXPECT_EQ(again.encode(kTricky + " hello world"), tokenizer.encode(kTricky + " hello world"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1)
      << "a temporary file remains";
  expect_error<DataError>("unwritable",
                          [&] { tokenizer.save(dir.file("no/such/dir/tokenizer.json")); },
                          {"cannot write tokenizer", "no/such/dir/tokenizer.json"});
}

}  // namespace
}  // namespace ternion
