// The pre-tokenizer's regex cuts text as tokenizers' does (Oniguruma): the expected pieces are
// what tokenizers 0.23's Split(pattern, "isolated").pre_tokenize_str gave for the same text.
#include "data/bpe_regex.h"

#include <gtest/gtest.h>

#include "data_test_support.h"

namespace ternion {
namespace {

using test::expect_error;

constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// U+180E, U+0085, U+00A0, U+2028, U+3000, tabs, \r\n, \v, \f and two controls Python calls
// whitespace (U+001C, U+001F) but Oniguruma does not.
const std::string kSpaces =
    "a\xe1\xa0\x8e"
    "b \xc2\x85"
    "c\xc2\xa0"
    " d\xe2\x80\xa8"
    "e\xe3\x80\x80"
    "\xe3\x80\x80"
    "f \x09\n\x0d\n  g\x0b\x0ch \x1c\x1fi   ";
const std::string kContractions =
    "x'\xc5\xbf"
    " X'S DON'T we'LL 12345  \n\n\n  !!?\n";

std::vector<std::string> pieces(const std::string& pattern, const std::string& text) {
  const BpeRegex regex(pattern, "test pattern");
  BpeRegex::Matcher matcher(regex);
  IsolatedSplit split(matcher, text, 0);
  std::vector<std::string> out;
  IsolatedSplit::Piece piece;
  while (split.next(&piece)) out.push_back(text.substr(piece.begin, piece.end - piece.begin));
  return out;
}

TEST(BpeRegex, Gpt2PatternCutsUnicodeSpacesAsOniguruma) {
  const std::vector<std::string> expected = {"a",
                                             "\xe1\xa0\x8e",
                                             "b",
                                             " ",
                                             "\xc2\x85",
                                             "c",
                                             "\xc2\xa0",
                                             " d",
                                             "\xe2\x80\xa8",
                                             "e",
                                             "\xe3\x80\x80",
                                             "\xe3\x80\x80",
                                             "f",
                                             " \x09\n\x0d\n ",
                                             " g",
                                             "\x0b",
                                             "\x0c",
                                             "h",
                                             " \x1c\x1f",
                                             "i",
                                             "   "};
  EXPECT_EQ(pieces(kGpt2Pattern, kSpaces), expected);
  const std::vector<std::string> contractions = {
      "x", "'",   "\xc5\xbf", " X", "'",      "S",         " DON", "'",
      "T", " we", "'",        "LL", " 12345", "  \n\n\n ", " !!?", "\n"};
  EXPECT_EQ(pieces(kGpt2Pattern, kContractions), contractions);
}

TEST(BpeRegex, Llama3PatternCutsAsOniguruma) {
  const std::vector<std::string> expected = {"a",
                                             "\xe1\xa0\x8e"
                                             "b",
                                             " ",
                                             "\xc2\x85"
                                             "c",
                                             "\xc2\xa0",
                                             " d",
                                             "\xe2\x80\xa8"
                                             "e",
                                             "\xe3\x80\x80",
                                             "\xe3\x80\x80"
                                             "f",
                                             " \x09\n\x0d\n",
                                             " ",
                                             " g",
                                             "\x0b",
                                             "\x0ch",
                                             " \x1c\x1f",
                                             "i",
                                             "   "};
  EXPECT_EQ(pieces(kLlama3Pattern, kSpaces), expected);
  // (?i:'s) takes the long s (U+017F), as Oniguruma's case folding does.
  const std::vector<std::string> contractions = {"x",  "'\xc5\xbf", " X",  "'S",    " DON",
                                                 "'T", " we",       "'LL", " ",     "123",
                                                 "45", "  \n\n\n",  " ",   " !!?\n"};
  EXPECT_EQ(pieces(kLlama3Pattern, kContractions), contractions);
}

TEST(BpeRegex, EmptyMatchesFollowTheIterator) {
  // tokenizers: Split(Regex("x*")) cuts "abxxc" into a, b, xx, c; "" into nothing.
  EXPECT_EQ(pieces("x*", "abxxc"), (std::vector<std::string>{"a", "b", "xx", "c"}));
  EXPECT_TRUE(pieces("x*", "").empty());
  EXPECT_TRUE(BpeRegex("x*", "p").can_match_empty());
  EXPECT_FALSE(BpeRegex(kGpt2Pattern, "p").can_match_empty());
}

TEST(BpeRegex, RubySyntaxIsTranslated) {
  EXPECT_EQ(pieces("^a", "a\na"), (std::vector<std::string>{"a", "\n", "a"}));   // line anchors
  EXPECT_EQ(pieces("(?m:.+)", "ab\ncd"), (std::vector<std::string>{"ab\ncd"}));  // m is dotall
  EXPECT_EQ(pieces("\\u00e9",
                   "a\xc3\xa9"
                   "b"),
            (std::vector<std::string>{"a", "\xc3\xa9", "b"}));
  EXPECT_EQ(pieces("x{,2}|.", "xxx"), (std::vector<std::string>{"xx", "x"}));  // {,m} is {0,m}
  EXPECT_EQ(pieces("\\x{78}+|.", "xxa"), (std::vector<std::string>{"xx", "a"}));
  // A brace that starts no repeat is text (PCRE2 10.43 would read "{ 2}" as one).
  EXPECT_EQ(pieces("a{ 2}|a{x", "aa{ 2}a{x"), (std::vector<std::string>{"a", "a{ 2}", "a{x"}));
  EXPECT_EQ(pieces("(?<x>a)\\k<x>", "aab"), (std::vector<std::string>{"aa", "b"}));
  // Scripts by the Script property: U+3001 (、) is Han by Script_Extensions only, U+0363 (a
  // combining a) Latin by Script_Extensions only.
  EXPECT_EQ(pieces("\\p{Han}+|.", "\xe4\xb8\xad\xe3\x80\x81\xe4\xb8\xad"),
            (std::vector<std::string>{"\xe4\xb8\xad", "\xe3\x80\x81", "\xe4\xb8\xad"}));
  EXPECT_EQ(pieces("[\\p{Latin}]+|.",
                   "a\xcd\xa3"
                   "b"),
            (std::vector<std::string>{"a", "\xcd\xa3", "b"}));
  EXPECT_EQ(pieces("\\P{Han}+|.", "ab\xe4\xb8\xad"),
            (std::vector<std::string>{"ab", "\xe4\xb8\xad"}));
  EXPECT_EQ(pieces("[^\\s]+", "a\xe1\xa0\x8e b"),
            (std::vector<std::string>{"a\xe1\xa0\x8e", " ", "b"}));
}

TEST(BpeRegex, OnigurumasPropertyNamesAreTranslated) {
  // Long category names, loosely written; POSIX names as Oniguruma's tables give them: ²
  // (U+00B2) is a word character outside a class only, U+0363 is Alphabetic.
  const std::string text = "ab1 \xc2\xb2_\xcd\xa3-";
  EXPECT_EQ(pieces("\\p{Letter}+|.", text), pieces("\\p{L}+|.", text));
  EXPECT_EQ(pieces("\\p{ lowercase-Letter }+", "aB"), (std::vector<std::string>{"a", "B"}));
  EXPECT_EQ(pieces("\\p{Word}+", text),
            (std::vector<std::string>{"ab1", " ", "\xc2\xb2_\xcd\xa3", "-"}));
  EXPECT_EQ(pieces("[\\p{Word}]+", text),
            (std::vector<std::string>{"ab1", " \xc2\xb2", "_\xcd\xa3", "-"}));
  EXPECT_EQ(pieces("\\P{Word}+", text),
            (std::vector<std::string>{"ab1", " ", "\xc2\xb2_\xcd\xa3", "-"}));
  EXPECT_EQ(pieces("\\p{Alnum}+", "ab1 \xc2\xb2_\xc3\xa9-"),
            (std::vector<std::string>{"ab1", " \xc2\xb2_", "\xc3\xa9", "-"}));
  EXPECT_EQ(pieces("[\\P{Digit}]+", text),
            (std::vector<std::string>{"ab", "1", " \xc2\xb2_\xcd\xa3-"}));
  EXPECT_EQ(pieces("\\p{^Graph}+", "a \t\xc2\xa0."),
            (std::vector<std::string>{"a", " \t\xc2\xa0", "."}));
  EXPECT_EQ(pieces("[\\P{Print}]+", "a \tb"), (std::vector<std::string>{"a ", "\t", "b"}));
  EXPECT_EQ(pieces("\\p{Punct}+", "a-b$"), (std::vector<std::string>{"a", "-", "b$"}));
  expect_error<DataError>("L&", [] { BpeRegex("\\p{L&}", "p"); },
                          {"\\p{L&} is not a property name Oniguruma"});
  expect_error<DataError>("negated set in a class", [] { BpeRegex("[a\\P{Word}]", "p"); },
                          {"\\P{Word} in a character class is not supported"});
}

TEST(BpeRegex, AClassInAClassAddsItsMembers) {
  // BLOOM's pre-tokenizer: everything but spaces and the punctuation in the inner class.
  const std::string bloom = " ?[^(\\s|[.,!?\xe2\x80\xa6])]+";
  EXPECT_EQ(pieces(bloom, "Hi, a(b)|c [x]."),
            (std::vector<std::string>{"Hi", ",", " a", "(", "b", ")|", "c", " [x]", "."}));
  EXPECT_EQ(pieces("[x[a-c[d]]]+", "abxdy"), (std::vector<std::string>{"abxd", "y"}));
  // A '-' first or last in the inner class is text there, and stays text without its brackets.
  EXPECT_EQ(pieces("[a[-z]]+", "a-zm"), (std::vector<std::string>{"a-z", "m"}));
  expect_error<DataError>("escaped backslash, then a range", [] { BpeRegex("[\\\\-[ab]]", "p"); },
                          {"inside a character class at byte 4"});
  expect_error<DataError>("negated", [] { BpeRegex("[a[^b]]", "p"); },
                          {"inside a character class at byte 2"});
  expect_error<DataError>("range to", [] { BpeRegex("[a-[b]]", "p"); },
                          {"inside a character class at byte 3"});
  expect_error<DataError>("range from", [] { BpeRegex("[[a]-z]", "p"); }, {"ends a range"});
}

TEST(BpeRegex, CommentsAreNotReadAsSyntax) {
  // (?x) holds to the end of its group, (?x:...) within it; (?#...) everywhere.
  EXPECT_EQ(pieces("(?x) a # [ { comment\n b", "ab"), (std::vector<std::string>{"ab"}));
  EXPECT_EQ(pieces("(?x:a # (\n b)c| #", "abc #"), (std::vector<std::string>{"abc", " #"}));
  EXPECT_EQ(pieces("(?x)(a # )\n)b", "ab"), (std::vector<std::string>{"ab"}));
  EXPECT_EQ(pieces("(?x)a(?-x: #)", "a #"), (std::vector<std::string>{"a #"}));
  EXPECT_EQ(pieces("a(?#[{)b", "ab"), (std::vector<std::string>{"ab"}));
  // A comment that runs to the pattern's end ends before the group (?x) opened closes.
  EXPECT_EQ(pieces("(?x)a # note", "a a"), (std::vector<std::string>{"a", " ", "a"}));
  // (?xx) is (?x) in Oniguruma: a space in a class is a member (PCRE2's xx would skip it).
  EXPECT_EQ(pieces("(?xx)[a b]+", "a b"), (std::vector<std::string>{"a b"}));
  // Letters are read in order: x-x is off, i-i case-sensitive (and a second '-' changes nothing).
  EXPECT_EQ(pieces("(?x-x)a b", "a b ab"), (std::vector<std::string>{"a b", " ab"}));
  EXPECT_EQ(pieces("(?i-i)a", "A a"), (std::vector<std::string>{"A ", "a"}));
  EXPECT_EQ(pieces("(?ix-i-)a b", "AB ab"), (std::vector<std::string>{"AB ", "ab"}));
  // Oniguruma's (?#...) skips an escaped ')'.
  EXPECT_EQ(pieces("(?#\\)(b)a", "ba a"), (std::vector<std::string>{"b", "a", " ", "a"}));
  expect_error<DataError>("unterminated", [] { BpeRegex("(?#\\)x", "p"); }, {"has no end"});
  // Oniguruma skips only ASCII space under (?x): \v is a character there.
  EXPECT_EQ(pieces("(?x)a\x0b"
                   "b",
                   "ab a\x0b"
                   "b"),
            (std::vector<std::string>{"ab ",
                                      "a\x0b"
                                      "b"}));
  // Two quantifiers a comment separates: stacked in Oniguruma ((a+)?), joined in PCRE2 (a+?).
  expect_error<DataError>("quantifiers", [] { BpeRegex("a+(?#)?", "p"); },
                          {"a quantifier after a quantifier and a comment or space"});
  expect_error<DataError>("quantifiers, (?x)", [] { BpeRegex("(?x)a{2} ?", "p"); },
                          {"a quantifier after a quantifier"});
}

TEST(BpeRegex, AnOptionHoldsToTheEndOfItsGroupAlternativesIncluded) {
  // Oniguruma reads a(?i)b|c as a(?i:b|c): a lone "c" does not match.
  EXPECT_EQ(pieces("a(?i)b|c", "ab c ac aB"),
            (std::vector<std::string>{"ab", " c ", "ac", " ", "aB"}));
  EXPECT_EQ(pieces("(a|(?i)b)c", "Bc ac Ac"), (std::vector<std::string>{"Bc", " ", "ac", " Ac"}));
}

TEST(BpeRegex, RefusesWhatTheEnginesReadDifferently) {
  expect_error<DataError>("\\w", [] { BpeRegex("\\w+", "the pattern"); },
                          {"the pattern", "\\w is not supported", "Oniguruma"});
  expect_error<DataError>("\\h", [] { BpeRegex("\\h", "p"); }, {"\\h is not supported"});
  expect_error<DataError>("&&", [] { BpeRegex("[a-z&&[^aeiou]]", "p"); }, {"&&"});
  expect_error<DataError>("posix", [] { BpeRegex("[[:alpha:]]+", "p"); },
                          {"the POSIX class [:alpha:] is not supported"});
  expect_error<DataError>("interval+", [] { BpeRegex("\\p{N}{1,3}+", "p"); },
                          {"the repeat {1,3}+ is not supported"});
  expect_error<DataError>("\\Q", [] { BpeRegex("\\Qa.b\\E", "p"); }, {"\\Q is not supported"});
  expect_error<DataError>("{n}?", [] { BpeRegex("ba{2}?", "p"); },
                          {"the repeat {2}? is not supported"});
  EXPECT_EQ(pieces("a{1,2}?|.", "aab"), (std::vector<std::string>{"a", "a", "b"}));  // lazy in both
  expect_error<DataError>("\\v", [] { BpeRegex("\\v+", "p"); }, {"\\v is not supported"});
  expect_error<DataError>("\\pL", [] { BpeRegex("\\pL", "p"); }, {"\\p is not supported"});
  expect_error<DataError>("\\x", [] { BpeRegex("\\x", "p"); },
                          {"\\x without hex digits is not supported"});
  // The letter g in Oniguruma, a backreference in PCRE2.
  expect_error<DataError>("\\g1", [] { BpeRegex("(a)\\g1", "p"); },
                          {"\\g without <name> or 'name' is not supported"});
  expect_error<DataError>("\\k{", [] { BpeRegex("(?<x>a)\\k{x}", "p"); }, {"\\k without <name>"});
  expect_error<DataError>("(?s)", [] { BpeRegex("(?s).", "p"); },
                          {"the option (?s is not one of Ruby's"});
  expect_error<DataError>("syntax", [] { BpeRegex("(ab", "the pattern"); },
                          {"the pattern", "'(ab' does not compile"});
}

}  // namespace
}  // namespace ternion
