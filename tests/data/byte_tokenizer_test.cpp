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

TEST(ByteTokenizer, OutOfVocabularyDecodesAsQuestionMark) {
  std::vector<std::int32_t> ids = {'a', 256, 'b', -1, 1000, 'c'};
  EXPECT_EQ(decode_bytes(ids), "a?b??c");
  EXPECT_EQ(decode_bytes({}), "");
  EXPECT_TRUE(encode_bytes("").empty());
}

}  // namespace
}  // namespace ternion
