// Byte tokenizer: exact round trip of every byte; out-of-range ids decode as '?'.
#include "data/byte_tokenizer.h"

#include <gtest/gtest.h>

#include "data_test_support.h"

namespace ternion {
namespace {

TEST(ByteTokenizer, RoundTripsEveryByte) {
  std::string text;
  for (int b = 0; b < 256; ++b) text += static_cast<char>(b);
  text += "hello, world\n";
  std::vector<std::uint16_t> tokens = encode_bytes(text);
  ASSERT_EQ(tokens.size(), text.size());
  std::vector<std::int64_t> got(tokens.begin(), tokens.end()), want;
  for (char c : text) want.push_back(static_cast<unsigned char>(c));
  test::expect_same_ints("byte values", got, want);

  std::vector<std::int32_t> ids(tokens.begin(), tokens.end());
  EXPECT_EQ(decode_bytes(ids), text);
  EXPECT_EQ(kByteVocabSize, 256);
}

TEST(ByteTokenizer, IdsOutsideTheBytesDecodeAsTheirNumber) {
  std::vector<std::int32_t> ids = {'a', 256, 'b', -1, 50256, 'c'};
  EXPECT_EQ(decode_bytes(ids), "a<256>b<-1><50256>c");
  EXPECT_EQ(decode_bytes({}), "");
  EXPECT_TRUE(encode_bytes("").empty());
}

TEST(ByteTokenizer, PromptBytesOutsideTheVocabularyAreNamed) {
  EXPECT_EQ(prompt_problem("The cat", 256), "");
  EXPECT_EQ(prompt_problem("The cat", 123), "");  // 'T'..'t' are below 123
  EXPECT_EQ(prompt_problem("", 256), "the prompt is empty: a sample continues at least one token");
  const std::string problem = prompt_problem("ab\xC3\xBF", 123);
  EXPECT_NE(problem.find("0xC3"), std::string::npos) << problem;
  EXPECT_NE(problem.find("offset 2"), std::string::npos) << problem;
  EXPECT_NE(problem.find("vocabulary of 123"), std::string::npos) << problem;
  EXPECT_NE(prompt_problem("z{", 123), "");  // '{' is 123 itself
}

}  // namespace
}  // namespace ternion
