#include "data/regex_translate.h"

#include <cctype>
#include <cstdio>
#include <vector>

#include "data/byte_level.h"
#include "data/regex_property.h"
#include "framework/error.h"

namespace ternion {

namespace {

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// A repeat at pattern[i] ('{'): {n}, {n,}, {n,m} or Ruby's {,m}; the index of its '}', or
// npos where the brace starts no repeat.
std::size_t repeat_end(const std::string& pattern, std::size_t i) {
  std::size_t j = i + 1;
  while (j < pattern.size() &&
         (std::isdigit(static_cast<unsigned char>(pattern[j])) != 0 || pattern[j] == ','))
    ++j;
  const std::string inside = pattern.substr(i + 1, j - i - 1);
  const std::size_t comma = inside.find(',');
  const bool repeat = j < pattern.size() && pattern[j] == '}' && !inside.empty() && inside != "," &&
                      comma == inside.rfind(',');
  return repeat ? j : std::string::npos;
}

// Whether pattern[i] is escaped (an odd run of backslashes before it).
bool escaped(const std::string& pattern, std::size_t i) {
  std::size_t backslashes = 0;
  while (backslashes < i && pattern[i - 1 - backslashes] == '\\') ++backslashes;
  return backslashes % 2 == 1;
}

// The pattern in PCRE2's syntax (see the header), or a DataError naming `where`: one pass over
// the pattern, with the state of the class and the groups it is in.
class Translator {
 public:
  Translator(const std::string& pattern, const std::string& where)
      : pattern_(pattern), where_(where) {
    out_.reserve(pattern.size() + 32);
    groups_.push_back({false, false});  // the whole pattern
  }

  std::string run() {
    while (i_ < pattern_.size()) {
      const char c = pattern_[i_];
      if (!in_class_ && (c == '#' ? extended_ : pattern_.compare(i_, 3, "(?#") == 0)) {
        comment();
      } else if (!in_class_ && extended_ && is_extended_space()) {
        extended_space();
      } else if (c == '\\') {
        note_item(false);
        escape();
      } else if (in_class_) {
        class_member();
      } else {
        const bool quantifier =
            c == '*' || c == '+' || c == '?' || (c == '{' && repeat_end(pattern_, i_) != npos);
        // PCRE2 joins two quantifiers that a comment or (?x)'s space separate; Oniguruma
        // stacks them (a+(?#)? is (?:a+)? there, the lazy a+? here).
        if (quantifier && after_quantifier_ && skipped_)
          TN_THROW(DataError, where_,
                   ": a quantifier after a quantifier and a comment or space "
                   "(byte ",
                   i_, ") is not supported (Oniguruma and PCRE2 apply it differently)");
        note_item(quantifier);
        outside_class(c);
      }
    }
    while (groups_.back().isolated) close_group();
    return out_;
  }

 private:
  static constexpr std::size_t npos = std::string::npos;

  struct Group {
    bool extended_outside;  // (?x) outside the group
    bool isolated;          // opened for a (?flags): closes with the group around it
  };

  [[noreturn]] void refuse(const std::string& what) const {
    TN_THROW(DataError, where_, ": ", what);
  }

  void note_item(bool quantifier) {
    after_quantifier_ = quantifier;
    skipped_ = false;
  }

  // (?#...) (Oniguruma skips \) inside it; PCRE2 takes no ')' there: it becomes (?#)), or '#'
  // to the line's end under (?x) (copied: PCRE2 skips it too).
  void comment() {
    skipped_ = true;
    if (pattern_[i_] == '#') {
      const std::size_t end = pattern_.find('\n', i_);
      const std::size_t stop = end == npos ? pattern_.size() : end + 1;
      out_.append(pattern_, i_, stop - i_);
      if (end == npos) out_ += '\n';  // ends it before a group closed after it
      i_ = stop;
      return;
    }
    std::size_t j = i_ + 3;
    while (j < pattern_.size() && pattern_[j] != ')') j += pattern_[j] == '\\' ? 2 : 1;
    if (j >= pattern_.size())
      refuse("the comment (?# at byte " + std::to_string(i_) + " has no end");
    out_ += "(?#)";
    i_ = j + 1;
  }

  // Oniguruma skips only ASCII space, \t, \n, \f and \r under (?x); PCRE2 also skips \v,
  // U+0085, U+200E, U+200F, U+2028 and U+2029, which are kept here as characters.
  bool is_extended_space() const {
    const char c = pattern_[i_];
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == '\v' ||
           pattern_.compare(i_, 2, "\xc2\x85") == 0 ||
           pattern_.compare(i_, 3, "\xe2\x80\x8e") == 0 ||
           pattern_.compare(i_, 3, "\xe2\x80\x8f") == 0 ||
           pattern_.compare(i_, 3, "\xe2\x80\xa8") == 0 ||
           pattern_.compare(i_, 3, "\xe2\x80\xa9") == 0;
  }

  void extended_space() {
    const char c = pattern_[i_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r') {
      skipped_ = true;
      out_ += c;
      ++i_;
      return;
    }
    int length = 1;
    const char32_t code = byte_level::decode_utf8(pattern_, i_, &length);
    char text[16];
    std::snprintf(text, sizeof text, "\\x{%X}", static_cast<unsigned>(code));
    note_item(false);
    out_ += text;
    i_ += static_cast<std::size_t>(length);
  }

  void escape() {
    const std::size_t i = i_;
    const char e = i + 1 < pattern_.size() ? pattern_[i + 1] : '\0';
    const char after = i + 2 < pattern_.size() ? pattern_[i + 2] : '\0';
    if (e == 's' || e == 'S') {
      out_ += e == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
      i_ += 2;
      return;
    }
    // \k and \g name a group only as \k<name> or \k'name' in Oniguruma (else the letter);
    // PCRE2 reads \g1, \g{1} and \g-1 as backreferences.
    if ((e == 'k' || e == 'g') && after != '<' && after != '\'')
      refuse(std::string("\\") + e +
             " without <name> or 'name' is not supported (the letter in Oniguruma, which "
             "tokenizers uses, a backreference or an error in PCRE2)");
    if (e == 'x' && after != '{' && !is_hex(after))
      refuse(
          "\\x without hex digits is not supported (Oniguruma reads it as x or as a zero "
          "byte, PCRE2 as a zero byte)");
    const bool bare_property = (e == 'p' || e == 'P') && after != '{';
    if (e == 'h' || e == 'H' || e == 'w' || e == 'W' || e == 'b' || e == 'B' || e == 'Q' ||
        e == 'E' || e == 'v' || e == 'V' || bare_property)
      refuse(std::string("\\") + e +
             " is not supported (Oniguruma, which tokenizers uses, and PCRE2 give it different "
             "meanings)");
    if ((e == 'x' || e == 'o' || e == 'p' || e == 'P') && after == '{') {
      const std::size_t close = pattern_.find('}', i + 3);  // \x{HHHH}, \o{OOO}: one character
      if (close != npos) {
        const std::string whole = pattern_.substr(i, close + 1 - i);
        out_ += e == 'p' || e == 'P' ? pcre2_property(whole, in_class_, where_) : whole;
        i_ = close + 1;
        return;
      }
    }
    if (e == 'u' && i + 6 <= pattern_.size() && is_hex(pattern_[i + 2]) &&
        is_hex(pattern_[i + 3]) && is_hex(pattern_[i + 4]) && is_hex(pattern_[i + 5])) {
      out_ += "\\x{" + pattern_.substr(i + 2, 4) + "}";
      i_ += 6;
      return;
    }
    // Any other escape means the same in both: copy it with its whole (UTF-8) character.
    const std::size_t length =
        i + 1 < pattern_.size() ? 1 + byte_level::utf8_length(static_cast<std::uint8_t>(e)) : 1;
    out_.append(pattern_, i, length);
    i_ += length;
  }

  void class_member() {
    const std::size_t i = i_;
    const char c = pattern_[i];
    if (c == '[') {
      const std::size_t close = pattern_.find(":]", i);
      if (i + 1 < pattern_.size() && pattern_[i + 1] == ':' && close != npos)
        refuse("the POSIX class " + pattern_.substr(i, close + 2 - i) +
               " is not supported (Oniguruma and PCRE2 give it different Unicode members)");
      // A class inside a class adds its members (BLOOM's pattern has one): PCRE2 reads the
      // same without its brackets. A negated one, or one that a range meets, has no such form.
      const char next = i + 1 < pattern_.size() ? pattern_[i + 1] : '\0';
      const bool range_ends_here = i > class_start_ + 1 && pattern_[i - 1] == '-' &&
                                   !escaped(pattern_, i - 1) && pattern_[i - 2] != '[';
      if (next == '^' || next == ']' || range_ends_here)
        refuse("the character class inside a character class at byte " + std::to_string(i) +
               " is not supported (PCRE2 has nested classes of plain members only)");
      ++nested_;
      ++i_;
      return;
    }
    if (c == '&' && i + 1 < pattern_.size() && pattern_[i + 1] == '&')
      refuse("class intersection && (byte " + std::to_string(i) + ") is not supported by PCRE2");
    if (c == ']' && nested_ > 0) {
      if (i + 2 < pattern_.size() && pattern_[i + 1] == '-' && pattern_[i + 2] != ']')
        refuse("the character class inside a character class at byte " + std::to_string(i) +
               " ends a range, which PCRE2 does not support");
      --nested_;
      ++i_;
      return;
    }
    // A '-' first or last in an inner class is text; without the brackets it would join a range.
    const bool opens_inner = nested_ > 0 && pattern_[i - 1] == '[' && !escaped(pattern_, i - 1);
    const bool closes_inner = nested_ > 0 && i + 1 < pattern_.size() && pattern_[i + 1] == ']';
    if (c == '-' && (opens_inner || closes_inner)) {
      out_ += "\\-";
      ++i_;
      return;
    }
    if (c == ']' && i > class_start_) in_class_ = false;
    out_ += c;
    ++i_;
  }

  void outside_class(char c) {
    const std::size_t i = i_;
    if (c == '[') {
      in_class_ = true;
      class_start_ = i + 1 < pattern_.size() && pattern_[i + 1] == '^' ? i + 2 : i + 1;
      out_.append(pattern_, i, class_start_ - i);
      i_ = class_start_;
      return;
    }
    if (c == '{') {
      const std::size_t j = repeat_end(pattern_, i);
      if (j == npos) {
        // Text in both; escaped, as PCRE2 10.43 reads "{ 2}" as a repeat.
        out_ += "\\{";
        ++i_;
        return;
      }
      const std::string inside = pattern_.substr(i + 1, j - i - 1);
      const char next = j + 1 < pattern_.size() ? pattern_[j + 1] : '\0';
      if (next == '+')
        refuse("the repeat {" + inside +
               "}+ is not supported (a repeat of the repeat in Oniguruma, possessive in PCRE2)");
      if (next == '?' && inside.find(',') == npos)
        refuse("the repeat {" + inside +
               "}? is not supported (optional in Oniguruma, the same as {" + inside +
               "} in PCRE2)");
      out_ += inside[0] == ',' ? "{0" + inside + "}" : "{" + inside + "}";  // Ruby's {,m}
      i_ = j + 1;
      return;
    }
    if (c == '(' && pattern_.compare(i, 2, "(?") == 0 && options()) return;
    if (c == '(') groups_.push_back({extended_, false});
    if (c == ')') {
      while (groups_.back().isolated) close_group();  // the whole pattern's is not
      if (groups_.size() > 1) {
        extended_ = groups_.back().extended_outside;
        groups_.pop_back();
      }
    }
    out_ += c;
    ++i_;
  }

  // (?flags) or (?flags:: Ruby's m (dot matches newline) is PCRE2's s, and Ruby has no other
  // option letters than i, m and x (tokenizers refuses them), though PCRE2 has. (?flags) holds
  // to the end of the group around it, alternatives included (a(?i)b|c is a(?i:b|c) in
  // Oniguruma, (?:a(?i)b)|c in PCRE2): it opens a group that closes with that one.
  bool options() {
    const std::size_t i = i_;
    std::size_t j = i + 2;
    while (j < pattern_.size() &&
           (std::isalpha(static_cast<unsigned char>(pattern_[j])) != 0 || pattern_[j] == '-'))
      ++j;
    if (j == i + 2 || j >= pattern_.size() || (pattern_[j] != ':' && pattern_[j] != ')'))
      return false;
    bool x = extended_, turning_on = true;
    for (std::size_t k = i + 2; k < j; ++k) {
      const char letter = pattern_[k];
      if (letter != 'i' && letter != 'm' && letter != 'x' && letter != '-')
        refuse("the option (?" + pattern_.substr(i + 2, j - i - 2) +
               " is not one of Ruby's (i, m, x), which tokenizers reads");
      if (letter == '-') turning_on = false;
      if (letter == 'x') x = turning_on;
    }
    // Each letter once on each side of one '-' (Oniguruma reads them in order, so x-x is
    // off, as in PCRE2): PCRE2 reads xx as "extended more" (spaces in classes skipped too).
    out_ += "(?";
    std::string written;
    bool off = false;
    for (std::size_t k = i + 2; k < j; ++k) {
      const char letter = pattern_[k] == 'm' ? 's' : pattern_[k];
      if (letter == '-') {
        if (!off) out_ += '-';
        off = true;
        written.clear();
      } else if (written.find(letter) == npos) {
        out_ += letter;
        written += letter;
      }
    }
    out_ += ':';
    groups_.push_back({extended_, pattern_[j] == ')'});
    extended_ = x;
    i_ = j + 1;
    return true;
  }

  void close_group() {
    extended_ = groups_.back().extended_outside;
    groups_.pop_back();
    out_ += ')';
  }

  const std::string& pattern_;
  const std::string& where_;
  std::string out_;
  std::size_t i_ = 0;
  bool in_class_ = false;
  std::size_t class_start_ = 0;    // where the class's members begin ('[' or '[^' skipped)
  int nested_ = 0;                 // classes open inside the class
  bool extended_ = false;          // (?x): '#' starts a comment, ASCII space is skipped
  std::vector<Group> groups_;      // the open groups, the whole pattern first
  bool after_quantifier_ = false;  // the last item was a quantifier
  bool skipped_ = false;           // a comment or (?x)'s space since the last item
};

}  // namespace

std::string oniguruma_to_pcre2(const std::string& pattern, const std::string& where) {
  return Translator(pattern, where).run();
}

}  // namespace ternion
