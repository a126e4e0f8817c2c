// Documents in JSON Lines: read in file order, bad lines named; encoded each on its own between
// the tokenizer's markers, a marker's text inside a document encoded as text, the same tokens
// for any thread count.
#include "data/jsonl_documents.h"

#include <gtest/gtest.h>

#include "data_test_support.h"

namespace ternion {
namespace {

using Ids = std::vector<std::int32_t>;

TEST(JsonlDocuments, ReadsEachDocumentInOrder) {
  const std::string jsonl =
      "{\"text\": \"first doc\", \"id\": 1}\n"
      "\n"
      "  \r\n"
      "{\"id\": 2, \"text\": \"caf\\u00e9\\nline\"}\r\n"
      "{\"text\": \"\"}\n"
      "{\"text\": \"last, no newline\"}";
  EXPECT_EQ(read_jsonl_documents(jsonl, "text", "docs.jsonl"),
            (std::vector<std::string>{"first doc", "caf\xC3\xA9\nline", "", "last, no newline"}));
  EXPECT_EQ(read_jsonl_documents("{\"body\": \"b\", \"text\": \"t\"}\n", "body", "d"),
            std::vector<std::string>{"b"});
}

// GPT-2's kind: the end of text before each document (llm.c's layout); each document's tokens
// are its own, whatever its edges are (a space, a digit, half a word), and the marker's text
// inside a document is text, not a separator.
TEST(JsonlDocuments, EachDocumentFollowsGpt2sEndOfText) {
  const Tokenizer bpe(BpeTokenizer::train("the cat sat on the mat; 123 the cat ate the rat.  ", 290,
                                          {"<|endoftext|>"}));
  const std::int32_t eot = bpe.end_of_text_id();
  const std::vector<std::string> documents = {
      "the cat ", " sat on", "123", "4 the mat.", "at", "", "a <|endoftext|> b"};
  Ids expected;
  for (const std::string& document : documents) {
    expected.push_back(eot);
    const Ids alone = bpe.bpe()->encode_placed(document, {});
    expected.insert(expected.end(), alone.begin(), alone.end());
  }
  for (const int threads : {1, 2, 3, 16}) {
    const Ids got = encode_documents(bpe, documents, threads);
    EXPECT_EQ(got, expected) << threads << " threads";
    EXPECT_EQ(std::count(got.begin(), got.end(), eot), 7) << "one marker a document";
  }
  // Matched, the marker's text would have split the last document; placed, it is text.
  const Ids matched = bpe.encode("a <|endoftext|> b");
  EXPECT_EQ(std::count(matched.begin(), matched.end(), eot), 1);
  EXPECT_NE(bpe.bpe()->encode_placed("a <|endoftext|> b", {}), matched);
  for (const std::string& document : documents) {
    if (document.find("<|") == std::string::npos) {
      EXPECT_EQ(bpe.bpe()->encode_placed(document, {}), bpe.encode(document)) << document;
    }
  }
  // A token placed where its text is encodes as the matched one does.
  const std::string text = "the cat<|endoftext|>sat 12";
  const BpeTokenizer::PlacedToken at{7, 20, eot};
  EXPECT_EQ(bpe.bpe()->encode_placed(text, {&at, 1}, 2), bpe.encode(text));
}

// Llama 3's kind: each document between its begin and end of text, as torchtitan lays them.
TEST(JsonlDocuments, ALlama3TokenizerPutsEachDocumentBetweenItsMarkers) {
  const Tokenizer llama3(BpeTokenizer::train("the cat sat on the mat. ", 270,
                                             {"<|begin_of_text|>", "<|end_of_text|>"}));
  const Tokenizer::DocumentMarkers markers = llama3.document_markers();
  EXPECT_EQ(markers.before, "<|begin_of_text|>");
  EXPECT_EQ(markers.after, "<|end_of_text|>");
  Ids expected{llama3.begin_of_text_id()};
  for (const std::int32_t id : llama3.encode("the cat")) expected.push_back(id);
  expected.push_back(llama3.end_of_text_id());
  expected.push_back(llama3.begin_of_text_id());
  for (const std::int32_t id : llama3.encode("sat")) expected.push_back(id);
  expected.push_back(llama3.end_of_text_id());
  EXPECT_EQ(encode_documents(llama3, {"the cat", "sat"}, 2), expected);
  const Tokenizer gpt2(BpeTokenizer::train("the cat. ", 262, {"<|endoftext|>"}));
  EXPECT_EQ(gpt2.document_markers().before, "<|endoftext|>");
  EXPECT_EQ(gpt2.document_markers().after, "");
  EXPECT_EQ(Tokenizer::bytes().document_markers().before, "");
  test::expect_error<DataError>("bytes", [] { encode_documents(Tokenizer::bytes(), {"a"}, 1); },
                                {"bytes (256 tokens) has no end-of-text token"});
}

TEST(JsonlDocuments, BadLinesAreNamedWithTheirReason) {
  auto read = [](const std::string& jsonl) {
    return [jsonl] { read_jsonl_documents(jsonl, "text", "--input 'd.jsonl'"); };
  };
  test::expect_error<DataError>("not JSON", read("{\"text\": \"a\"}\n{\"text\": \"b\"\n"),
                                {"--input 'd.jsonl' line 2: not JSON: column "});
  // A line cut short (an interrupted download) is named without its text.
  const std::string book(100000, 'w');
  try {
    read_jsonl_documents("{\"text\": \"" + book + "\n", "text", "d");
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
    EXPECT_EQ(std::string(e.what()).find("line 1,"), std::string::npos) << e.what();
  }
  test::expect_error<DataError>("not an object", read("\n[\"text\"]\n"),
                                {"line 2: is not a JSON object but a list"});
  test::expect_error<DataError>("a string", read("\"text\""),
                                {"line 1: is not a JSON object but a string"});
  test::expect_error<DataError>("no key", read("{\"txt\": \"a\"}"),
                                {"line 1: has no 'text'", "--json-key"});
  test::expect_error<DataError>("not a string", read("{\"text\": [\"a\"]}"),
                                {"line 1: 'text' is not a string but a list"});
  test::expect_error<DataError>("null", read("{\"text\": null}"),
                                {"'text' is not a string but null"});
  test::expect_error<DataError>("a key twice", read("{\"text\": \"a\", \"text\": \"b\"}"),
                                {"line 1: not JSON", "twice"});
  test::expect_error<DataError>("not UTF-8", read("{\"text\": \"\xff\"}"), {"line 1: not JSON"});
  test::expect_error<DataError>("no documents", read("\n \n"),
                                {"--input 'd.jsonl' holds no documents"});
  test::expect_error<DataError>("empty", read(""), {"holds no documents"});
}

}  // namespace
}  // namespace ternion
