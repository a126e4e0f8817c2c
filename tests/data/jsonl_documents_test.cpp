// Documents in JSON Lines: joined in file order, each after the separator, so that a BPE that
// matches its added tokens first encodes each document as on its own; bad lines are named.
#include "data/jsonl_documents.h"

#include <gtest/gtest.h>

#include "data/tokenizer.h"
#include "data_test_support.h"

namespace ternion {
namespace {

TEST(JsonlDocuments, JoinsEachDocumentAfterTheSeparator) {
  const std::string jsonl =
      "{\"text\": \"first doc\", \"id\": 1}\n"
      "\n"
      "  \r\n"
      "{\"id\": 2, \"text\": \"caf\\u00e9\\nline\"}\r\n"
      "{\"text\": \"\"}\n"
      "{\"text\": \"last, no newline\"}";
  const JsonlDocuments joined = join_jsonl_documents(jsonl, "text", "<S>", "docs.jsonl");
  EXPECT_EQ(joined.documents, 4);
  EXPECT_EQ(joined.text, "<S>first doc<S>caf\xC3\xA9\nline<S><S>last, no newline");
  EXPECT_EQ(join_jsonl_documents("{\"body\": \"b\", \"text\": \"t\"}\n", "body", "|", "d").text,
            "|b");
}

// The reason the documents are joined as text: the tokenizer splits at its added tokens before
// anything else, so the joined text's tokens are each document's own, the separator's id before
// each, whatever the documents' edges are (a space, a digit, half a word).
TEST(JsonlDocuments, JoinedTextEncodesAsEachDocumentAlone) {
  const Tokenizer bpe(BpeTokenizer::train("the cat sat on the mat; 123 the cat ate the rat.  ", 290,
                                          {"<|endoftext|>"}));
  const std::vector<std::string> documents = {"the cat ", " sat on", "123", "4 the mat.", "at"};
  std::string jsonl;
  std::vector<std::int32_t> expected;
  for (const std::string& document : documents) {
    jsonl += "{\"text\": \"" + document + "\"}\n";
    expected.push_back(bpe.end_of_text_id());
    const std::vector<std::int32_t> alone = bpe.encode(document);
    expected.insert(expected.end(), alone.begin(), alone.end());
  }
  const JsonlDocuments joined = join_jsonl_documents(jsonl, "text", bpe.end_of_text(), "d");
  EXPECT_EQ(bpe.encode(joined.text), expected);
}

TEST(JsonlDocuments, BadLinesAreNamedWithTheirReason) {
  auto join = [](const std::string& jsonl) {
    return [jsonl] { join_jsonl_documents(jsonl, "text", "<S>", "--input 'd.jsonl'"); };
  };
  test::expect_error<DataError>("not JSON", join("{\"text\": \"a\"}\n{\"text\": \"b\"\n"),
                                {"--input 'd.jsonl' line 2: not JSON"});
  test::expect_error<DataError>("not an object", join("\n[\"text\"]\n"),
                                {"line 2: is not a JSON object but a list"});
  test::expect_error<DataError>("no key", join("{\"txt\": \"a\"}"),
                                {"line 1: has no 'text'", "--json-key"});
  test::expect_error<DataError>("not a string", join("{\"text\": [\"a\"]}"),
                                {"line 1: 'text' is not a string but a list"});
  test::expect_error<DataError>("null", join("{\"text\": null}"),
                                {"'text' is not a string but null"});
  test::expect_error<DataError>("a key twice", join("{\"text\": \"a\", \"text\": \"b\"}"),
                                {"line 1: not JSON", "twice"});
  test::expect_error<DataError>("not UTF-8", join("{\"text\": \"\xff\"}"), {"line 1: not JSON"});
  test::expect_error<DataError>("no documents", join("\n \n"),
                                {"--input 'd.jsonl' holds no documents"});
  test::expect_error<DataError>("empty", join(""), {"holds no documents"});
}

}  // namespace
}  // namespace ternion
