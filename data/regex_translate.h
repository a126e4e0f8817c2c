// A pre-tokenizer's pattern in Oniguruma's Ruby syntax (what tokenizers compiles) rewritten in
// PCRE2's syntax, so that PCRE2 matches what Oniguruma matches: data/bpe_regex.h lists the
// rewrites and the constructs refused because no rewrite reads the same in both.
#pragma once

#include <string>

namespace ternion {

// DataError "`where`: ..." naming a refused construct.
std::string oniguruma_to_pcre2(const std::string& pattern, const std::string& where);

}  // namespace ternion
