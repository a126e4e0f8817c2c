// BpeRegex: a pre-tokenizer's regular expression, matched as Hugging Face's `tokenizers` matches
// it (Oniguruma, Ruby syntax, UTF-8) but run by PCRE2 (UTF, Unicode properties, JIT).
//
// The two engines agree on what these patterns use (\p{..} classes, alternation, greedy
// repeats, lookahead, (?i:...)) except where the pattern is rewritten first:
//   \s, \S    Oniguruma: the Unicode White_Space property; PCRE2 adds U+180E and nothing else
//             differs, so they become \p{White_Space} and \P{White_Space};
//   \uHHHH    Oniguruma's code point escape, PCRE2's \x{HHHH};
//   ^ $       line anchors in Ruby syntax: PCRE2 compiles with PCRE2_MULTILINE;
//   (?m       Ruby's "dot matches newline", PCRE2's (?s;
//   a(?i)b|c  an option holds to the end of its group, alternatives included: a(?i:b|c);
//   {,n}      Ruby's {0,n} (PCRE2 10.42 reads it as text); a brace that starts no repeat
//             is escaped (text in both, but PCRE2 10.43 reads "{ 2}" as a repeat);
//   \p{Han}   a script, by the Script property in Oniguruma: PCRE2's \p{sc:Han} (its \p{Han}
//             goes by Script_Extensions); long category names and POSIX names (\p{Letter},
//             \p{Word}) as data/regex_property.h writes them;
//   [a[bc]]   a class inside a class adds its members: [abc] ([a[-z]] is [a\-z]);
//   #...      a comment under (?x), and (?#...) (which may hold \)): none of it read as
//             syntax; under (?x), the spaces PCRE2 skips and Oniguruma does not (\v, U+2028,
//             ...) are written as characters.
// Constructs whose meaning differs and cannot be rewritten so simply are refused: \h \H (hex
// digits in Oniguruma), \w \W \b \B (Oniguruma's word characters include combining marks),
// \Q \E (quoting in PCRE2 only), \v \V (one character in Oniguruma, a class in PCRE2), \p and
// \P without braces (text in Oniguruma), \k and \g without <name> or 'name' (the letter in
// Oniguruma, a backreference in PCRE2), \x without hex digits, POSIX classes ([:alpha:], of other
// members in each), a repeat followed by + ({1,3}+: a repeat of it in Ruby, possessive in PCRE2),
// {n}? (optional in Ruby, the same as {n} in PCRE2), option letters other than Ruby's i, m and x,
// class intersection (&&), a negated class or a range meeting a class inside a class, a
// quantifier after a quantifier and a comment or (?x)'s space (stacked in Oniguruma, joined in
// PCRE2), and property names PCRE2 10.42 lacks (blocks: \p{In_Basic_Latin}). Two differences
// remain: the Unicode versions of the two libraries' tables (letters assigned in the latest Unicode
// only), and caseless matching of one character against several ((?i)ss matches 'ß' in Oniguruma
// only).
//
// A compiled BpeRegex is immutable and shared between threads; each thread matches through its
// own Matcher.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace ternion {

// GPT-2's pre-tokenizer pattern (tokenizers' ByteLevel with use_regex).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3's (tokenizers' Split in its tokenizer.json: digits in threes, case-insensitive
// contractions, a letter run taking one leading non-letter).
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class BpeRegex {
 public:
  // DataError "`where`: ..." for a pattern PCRE2 cannot compile or one of the refused constructs.
  BpeRegex(const std::string& pattern, const std::string& where);
  BpeRegex(BpeRegex&&) noexcept;
  BpeRegex& operator=(BpeRegex&&) noexcept;
  ~BpeRegex();

  const std::string& pattern() const { return pattern_; }
  // Whether some subject might match empty (PCRE2's minimum match length is 0).
  bool can_match_empty() const { return can_match_empty_; }

  class Matcher {
   public:
    explicit Matcher(const BpeRegex& regex);
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    ~Matcher();
    // The leftmost match in `subject` starting at or after `from`: true with [*begin, *end).
    // The whole subject is the text the pattern sees (lookahead stops at its end).
    bool find(std::string_view subject, std::size_t from, std::size_t* begin, std::size_t* end);

   private:
    const BpeRegex& regex_;
    struct Handles;
    std::unique_ptr<Handles> handles_;
  };

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
  bool can_match_empty_ = true;
};

// A subject cut as tokenizers' Split with behavior Isolated cuts it: each match and each stretch
// between two matches is a piece, in order, empty ones left out (an empty match right after the
// previous match is skipped, as the Oniguruma binding's iterator does).
class IsolatedSplit {
 public:
  struct Piece {
    std::size_t begin = 0, end = 0;
    bool match_end = false;  // the piece is a match: splitting from `end` on gives the same pieces
  };
  // Splits subject[from..]; `from` is 0 or where a match ended.
  IsolatedSplit(BpeRegex::Matcher& matcher, std::string_view subject, std::size_t from);
  bool next(Piece* piece);  // false after the last piece

 private:
  BpeRegex::Matcher& matcher_;
  std::string_view subject_;
  std::size_t prev_;  // the end of the last piece
  std::size_t search_from_;
  std::size_t last_match_end_;  // npos before the first match
  std::size_t pending_begin_ = 0, pending_end_ = 0;
  bool pending_ = false;  // a match found after a gap, returned next
  bool done_ = false;
};

}  // namespace ternion
