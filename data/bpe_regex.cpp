#include "data/bpe_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <utility>
#include <vector>

#include "data/byte_level.h"
#include "data/regex_property.h"
#include "framework/error.h"

namespace ternion {

namespace {

// The JIT's stack grows on demand up to this (long runs of one class need little; nested
// alternatives under a repeat need more).
constexpr std::size_t kJitStackStart = 32 << 10;
constexpr std::size_t kJitStackMax = 16 << 20;

pcre2_code* code_of(void* code) { return static_cast<pcre2_code*>(code); }

std::string pcre2_message(int error) {
  PCRE2_UCHAR text[256];
  if (pcre2_get_error_message(error, text, sizeof text) < 0)
    return "error " + std::to_string(error);
  return reinterpret_cast<const char*>(text);
}

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// The pattern in PCRE2's syntax (see the header), or a DataError naming `where`.
std::string to_pcre2(const std::string& pattern, const std::string& where) {
  std::string out;
  out.reserve(pattern.size() + 32);
  bool in_class = false;
  std::size_t class_start = 0;  // where the class's members begin ('[' or '[^' skipped)
  int nested = 0;               // classes open inside the class
  bool extended = false;        // (?x): '#' starts a comment that runs to the line's end
  std::vector<bool> extended_outside;  // `extended` outside each open group
  for (std::size_t i = 0; i < pattern.size();) {
    const char c = pattern[i];
    if (!in_class && (c == '#' ? extended : pattern.compare(i, 3, "(?#") == 0)) {
      // A comment: copied as it is (PCRE2 skips it too), none of its characters read as syntax.
      const std::size_t end = pattern.find(c == '#' ? '\n' : ')', i);
      const std::size_t stop = end == std::string::npos ? pattern.size() : end + 1;
      out.append(pattern, i, stop - i);
      i = stop;
      continue;
    }
    if (c == '\\') {
      const char e = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
      if (e == 's' || e == 'S') {
        out += e == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
        i += 2;
        continue;
      }
      const bool bare_property =
          (e == 'p' || e == 'P') && (i + 2 >= pattern.size() || pattern[i + 2] != '{');
      // \k and \g name a group only as \k<name> or \k'name' in Oniguruma (else the letter);
      // PCRE2 reads \g1, \g{1} and \g-1 as backreferences.
      const char after = i + 2 < pattern.size() ? pattern[i + 2] : '\0';
      if ((e == 'k' || e == 'g') && after != '<' && after != '\'')
        TN_THROW(DataError, where, ": \\", e,
                 " without <name> or 'name' is not supported (the letter in Oniguruma, which "
                 "tokenizers uses, a backreference or an error in PCRE2)");
      if (e == 'x' && after != '{' && !is_hex(after))
        TN_THROW(DataError, where,
                 ": \\x without hex digits is not supported (Oniguruma reads it as x or as a "
                 "zero byte, PCRE2 as a zero byte)");
      if (e == 'h' || e == 'H' || e == 'w' || e == 'W' || e == 'b' || e == 'B' || e == 'Q' ||
          e == 'E' || e == 'v' || e == 'V' || bare_property)
        TN_THROW(DataError, where, ": \\", e,
                 " is not supported (Oniguruma, which tokenizers "
                 "uses, and PCRE2 give it different meanings)");
      if ((e == 'x' || e == 'o') && i + 2 < pattern.size() && pattern[i + 2] == '{') {
        const std::size_t close = pattern.find('}', i + 3);  // \x{HHHH}, \o{OOO}: one character
        if (close != std::string::npos) {
          out.append(pattern, i, close + 1 - i);
          i = close + 1;
          continue;
        }
      }
      if ((e == 'p' || e == 'P') && i + 2 < pattern.size() && pattern[i + 2] == '{') {
        const std::size_t close = pattern.find('}', i + 3);
        if (close != std::string::npos) {
          out += pcre2_property(pattern.substr(i, close + 1 - i), in_class, where);
          i = close + 1;
          continue;
        }
      }
      if (e == 'u' && i + 6 <= pattern.size() && is_hex(pattern[i + 2]) && is_hex(pattern[i + 3]) &&
          is_hex(pattern[i + 4]) && is_hex(pattern[i + 5])) {
        out += "\\x{" + pattern.substr(i + 2, 4) + "}";
        i += 6;
        continue;
      }
      // Any other escape means the same in both: copy it with its whole (UTF-8) character.
      const std::size_t length =
          i + 1 < pattern.size() ? 1 + byte_level::utf8_length(static_cast<std::uint8_t>(e)) : 1;
      out.append(pattern, i, length);
      i += length;
      continue;
    }
    if (in_class) {
      if (c == '[') {
        const std::size_t close = pattern.find(":]", i);
        if (i + 1 < pattern.size() && pattern[i + 1] == ':' && close != std::string::npos)
          TN_THROW(DataError, where, ": the POSIX class ", pattern.substr(i, close + 2 - i),
                   " is not supported (Oniguruma and PCRE2 give it different Unicode members)");
        // A class inside a class adds its members (BLOOM's pattern has one): PCRE2 reads the
        // same without its brackets. A negated one, or one that a range meets, has no such form.
        const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
        const bool range_ends_here = i > class_start + 1 && pattern[i - 1] == '-' &&
                                     pattern[i - 2] != '\\' && pattern[i - 2] != '[';
        if (next == '^' || next == ']' || range_ends_here)
          TN_THROW(DataError, where, ": the character class inside a character class at byte ", i,
                   " is not supported (PCRE2 has nested classes of plain members only)");
        ++nested;
        ++i;
        continue;
      }
      if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&')
        TN_THROW(DataError, where, ": class intersection && (byte ", i,
                 ") is not supported by PCRE2");
      if (c == ']' && nested > 0) {
        if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']')
          TN_THROW(DataError, where, ": the character class inside a character class at byte ", i,
                   " ends a range, which PCRE2 does not support");
        --nested;
        ++i;
        continue;
      }
      if (c == ']' && i > class_start) in_class = false;
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      class_start = i + 1 < pattern.size() && pattern[i + 1] == '^' ? i + 2 : i + 1;
      out.append(pattern, i, class_start - i);
      i = class_start;
      continue;
    }
    if (c == '{') {
      // A repeat {n}, {n,}, {n,m} or Ruby's {,m} (PCRE2 10.42 reads that one as text).
      std::size_t j = i + 1;
      while (j < pattern.size() &&
             (std::isdigit(static_cast<unsigned char>(pattern[j])) != 0 || pattern[j] == ','))
        ++j;
      const std::string inside = pattern.substr(i + 1, j - i - 1);
      const std::size_t comma = inside.find(',');
      if (j < pattern.size() && pattern[j] == '}' && !inside.empty() && inside != "," &&
          comma == inside.rfind(',')) {
        if (j + 1 < pattern.size() && pattern[j + 1] == '+')
          TN_THROW(DataError, where, ": the repeat {", inside,
                   "}+ is not supported (a repeat of the repeat in Oniguruma, possessive in "
                   "PCRE2)");
        if (j + 1 < pattern.size() && pattern[j + 1] == '?' && comma == std::string::npos)
          TN_THROW(DataError, where, ": the repeat {", inside,
                   "}? is not supported (optional in Oniguruma, the same as {", inside,
                   "} in PCRE2)");
        out += comma == 0 ? "{0" + inside + "}" : "{" + inside + "}";
        i = j + 1;
        continue;
      }
      // Any other brace is text in both; escaped, as PCRE2 10.43 reads {  2} as a repeat.
      out += "\\{";
      ++i;
      continue;
    }
    if (c == '(' && pattern.compare(i, 2, "(?") == 0) {
      // Option letters: Ruby's m (dot matches newline) is PCRE2's s. Ruby has no other
      // option letters (tokenizers refuses them), though PCRE2 has.
      std::size_t j = i + 2;
      while (j < pattern.size() &&
             (std::isalpha(static_cast<unsigned char>(pattern[j])) != 0 || pattern[j] == '-'))
        ++j;
      if (j > i + 2 && j < pattern.size() && (pattern[j] == ':' || pattern[j] == ')')) {
        for (std::size_t k = i + 2; k < j; ++k)
          if (pattern[k] != 'i' && pattern[k] != 'm' && pattern[k] != 'x' && pattern[k] != '-')
            TN_THROW(DataError, where, ": the option (?", pattern.substr(i + 2, j - i - 2),
                     " is not one of Ruby's (i, m, x), which tokenizers reads");
        for (std::size_t k = i; k <= j; ++k) out += pattern[k] == 'm' ? 's' : pattern[k];
        // (?x) holds to the end of the group around it; (?x:...) inside its own group.
        bool x = extended, turning_on = true;
        for (std::size_t k = i + 2; k < j; ++k) {
          if (pattern[k] == '-') turning_on = false;
          if (pattern[k] == 'x') x = turning_on;
        }
        if (pattern[j] == ':') extended_outside.push_back(extended);
        extended = x;
        i = j + 1;
        continue;
      }
    }
    if (c == '(') extended_outside.push_back(extended);
    if (c == ')' && !extended_outside.empty()) {
      extended = extended_outside.back();
      extended_outside.pop_back();
    }
    out += c;
    ++i;
  }
  return out;
}

}  // namespace

BpeRegex::BpeRegex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
  const std::string translated = to_pcre2(pattern, where);
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
      PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C, &error, &offset, context);
  pcre2_compile_context_free(context);
  if (code == nullptr)
    TN_THROW(DataError, where, ": '", pattern, "' does not compile: ", pcre2_message(error),
             " (at byte ", offset, " of its PCRE2 form '", translated, "')");
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  std::uint32_t min_length = 0;
  pcre2_pattern_info(code, PCRE2_INFO_MINLENGTH, &min_length);
  can_match_empty_ = min_length == 0;
}

BpeRegex::BpeRegex(BpeRegex&& other) noexcept
    : pattern_(std::move(other.pattern_)),
      code_(std::exchange(other.code_, nullptr)),
      jit_(other.jit_),
      can_match_empty_(other.can_match_empty_) {}

BpeRegex& BpeRegex::operator=(BpeRegex&& other) noexcept {
  if (this != &other) {
    if (code_ != nullptr) pcre2_code_free(code_of(code_));
    pattern_ = std::move(other.pattern_);
    code_ = std::exchange(other.code_, nullptr);
    jit_ = other.jit_;
    can_match_empty_ = other.can_match_empty_;
  }
  return *this;
}

BpeRegex::~BpeRegex() {
  if (code_ != nullptr) pcre2_code_free(code_of(code_));
}

struct BpeRegex::Matcher::Handles {
  pcre2_match_data* match = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ~Handles() {
    if (stack != nullptr) pcre2_jit_stack_free(stack);
    if (context != nullptr) pcre2_match_context_free(context);
    if (match != nullptr) pcre2_match_data_free(match);
  }
};

BpeRegex::Matcher::Matcher(const BpeRegex& regex)
    : regex_(regex), handles_(std::make_unique<Handles>()) {
  handles_->match = pcre2_match_data_create_from_pattern(code_of(regex.code_), nullptr);
  handles_->context = pcre2_match_context_create(nullptr);
  TN_CHECK(handles_->match != nullptr && handles_->context != nullptr, "out of memory");
  if (regex.jit_) {
    handles_->stack = pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
    TN_CHECK(handles_->stack != nullptr, "out of memory");
    pcre2_jit_stack_assign(handles_->context, nullptr, handles_->stack);
  }
}

BpeRegex::Matcher::~Matcher() = default;

bool BpeRegex::Matcher::find(std::string_view subject, std::size_t from, std::size_t* begin,
                             std::size_t* end) {
  static const char kEmpty[] = "";
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.empty() ? kEmpty : subject.data());
  pcre2_code* code = code_of(regex_.code_);
  // The text was checked to be UTF-8 once, before splitting.
  int rc = regex_.jit_ ? pcre2_jit_match(code, text, subject.size(), from, 0, handles_->match,
                                         handles_->context)
                       : PCRE2_ERROR_JIT_STACKLIMIT;
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
    rc = pcre2_match(code, text, subject.size(), from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                     handles_->match, handles_->context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0)
    TN_THROW(DataError, "the pre-tokenizer's pattern '", regex_.pattern_, "' failed at byte ", from,
             ": ", pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(handles_->match);
  *begin = ovector[0];
  *end = ovector[1];
  return true;
}

IsolatedSplit::IsolatedSplit(BpeRegex::Matcher& matcher, std::string_view subject, std::size_t from)
    : matcher_(matcher),
      subject_(subject),
      prev_(from),
      search_from_(from),
      last_match_end_(std::string_view::npos) {}

bool IsolatedSplit::next(Piece* piece) {
  const std::size_t n = subject_.size();
  for (;;) {
    if (pending_) {
      pending_ = false;
      prev_ = pending_end_;
      if (pending_begin_ == pending_end_) continue;
      *piece = {pending_begin_, pending_end_, true};
      return true;
    }
    if (done_) {
      if (prev_ >= n) return false;
      *piece = {prev_, n, false};
      prev_ = n;
      return true;
    }
    std::size_t begin = 0, end = 0;
    if (search_from_ > n || !matcher_.find(subject_, search_from_, &begin, &end)) {
      done_ = true;
      continue;
    }
    if (begin == end && end == last_match_end_) {
      search_from_ +=
          search_from_ < n
              ? byte_level::utf8_length(static_cast<std::uint8_t>(subject_[search_from_]))
              : 1;
      continue;
    }
    search_from_ = last_match_end_ = end;
    pending_ = true;
    pending_begin_ = begin;
    pending_end_ = end;
    if (prev_ != begin) {
      *piece = {prev_, begin, false};
      prev_ = begin;
      return true;
    }
  }
}

}  // namespace ternion
