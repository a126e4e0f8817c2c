// CliOptionValues: the `--option VALUE` pairs of the command lines (ternion-train,
// ternion-generate, ternion-export, ternion-plan).
//
// A value that is itself one of the program's options means the value was left out
// (`--checkpoint --prompt hi`): that is refused as such, rather than "--prompt" becoming the
// checkpoint path and "hi" an unknown argument. Any other value is taken as given, so a
// prompt may start with dashes. An option given twice is refused, since only one of the two
// values could be used. All failures are UsageError.
#pragma once

#include <charconv>
#include <cstdint>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include "framework/error.h"

namespace ternion {

class CliOptionValues {
 public:
  // `options`: the program's options (at least every one that takes a value); `repeatable`:
  // those that may be given more than once (`--set`), or whose repetition the caller checks.
  explicit CliOptionValues(std::set<std::string> options, std::set<std::string> repeatable = {})
      : options_(std::move(options)), repeatable_(std::move(repeatable)) {}

  // argv[i] is one of the options: returns its value, argv[i + 1], and steps i onto it.
  std::string take(int argc, char** argv, int& i) {
    const std::string option = argv[i];
    TN_CHECK_AS(UsageError, repeatable_.count(option) > 0 || seen_.insert(option).second, option,
                " given twice");
    TN_CHECK_AS(UsageError, i + 1 < argc, option, " needs a value");
    const std::string value = argv[i + 1];
    TN_CHECK_AS(UsageError, options_.count(value) == 0, option, " needs a value (got the option ",
                value, ")");
    ++i;
    return value;
  }

 private:
  std::set<std::string> options_;
  std::set<std::string> repeatable_;
  std::set<std::string> seen_;
};

// The number an option was given, the whole of `text`: decimal digits after an optional sign
// (no spaces, no fraction), or for cli_number a decimal or exponent number, inf and nan
// included (the caller checks its range). UsageError naming the option and saying which it is:
// not a number, or past the type's range (a huge integer, 1e999).
template <class T>
T cli_value(const std::string& option, const std::string& text, const char* what) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') ++first;  // from_chars takes '-' only
  T value{};
  const auto [end, error] = std::from_chars(first, last, value);
  TN_CHECK_AS(UsageError,
              end == last && first != last &&
                  (error == std::errc() || error == std::errc::result_out_of_range),
              option, ": not ", what, ": '", text, "'");
  TN_CHECK_AS(UsageError, error == std::errc(), option, ": '", text, "' is out of range");
  return value;
}
inline std::int64_t cli_integer(const std::string& option, const std::string& text) {
  return cli_value<std::int64_t>(option, text, "an integer");
}
inline double cli_number(const std::string& option, const std::string& text) {
  return cli_value<double>(option, text, "a number");
}

}  // namespace ternion
