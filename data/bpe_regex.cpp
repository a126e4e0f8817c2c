#include "data/bpe_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "data/byte_level.h"
#include "data/regex_translate.h"
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

}  // namespace

BpeRegex::BpeRegex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
  const std::string translated = oniguruma_to_pcre2(pattern, where);
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
