// Oniguruma's character properties (\p{Name}, \P{Name}, \p{^Name}) in PCRE2's syntax.
//
// The names tokenizers' patterns may use are Oniguruma's: the general categories by their
// short or long names (L, Letter, Lowercase_Letter), the scripts, the binary properties and the
// POSIX bracket names (Alnum, Digit, Word, Punct, ...), compared ignoring case, spaces,
// underscores and hyphens. PCRE2 10.42 knows the short categories, the scripts and most binary
// properties, so the rest are written as the sets Oniguruma gives them (checked code point by
// code point against tokenizers), and a script is matched by its Script property, as
// Oniguruma matches it (PCRE2's \p{Han} goes by Script_Extensions).
#pragma once

#include <string>

namespace ternion {

// `escape` is the whole escape, braces included. In a character class the result is members of
// that class; elsewhere it is one item (a property or a bracketed class). DataError naming
// `where` for a name Oniguruma refuses (one with characters other than letters, digits, spaces,
// '_' and '-'), and for a negated POSIX set inside a class, whose complement is no list of members.
std::string pcre2_property(const std::string& escape, bool in_class, const std::string& where);

}  // namespace ternion
