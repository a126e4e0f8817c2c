#include "data/regex_property.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

#include "framework/error.h"

namespace ternion {

namespace {

// A property as class members, and its complement as members where there is such a list.
struct PropertySet {
  const char* key;  // the name lower-cased, without spaces, '_' and '-'
  const char* members;
  const char* complement;               // nullptr: only a whole class can be negated ([^members])
  const char* outside_class = nullptr;  // the members outside a class, where Oniguruma's differ
};

#define TN_CATEGORY(key, short_name) \
  { key, "\\p{" short_name "}", "\\P{" short_name "}" }
constexpr PropertySet kPropertySets[] = {
    // The general categories' long names (PCRE2 10.42 knows the short ones only).
    TN_CATEGORY("letter", "L"),
    TN_CATEGORY("casedletter", "LC"),
    TN_CATEGORY("uppercaseletter", "Lu"),
    TN_CATEGORY("lowercaseletter", "Ll"),
    TN_CATEGORY("titlecaseletter", "Lt"),
    TN_CATEGORY("modifierletter", "Lm"),
    TN_CATEGORY("otherletter", "Lo"),
    TN_CATEGORY("mark", "M"),
    TN_CATEGORY("combiningmark", "M"),
    TN_CATEGORY("nonspacingmark", "Mn"),
    TN_CATEGORY("spacingmark", "Mc"),
    TN_CATEGORY("enclosingmark", "Me"),
    TN_CATEGORY("number", "N"),
    TN_CATEGORY("decimalnumber", "Nd"),
    TN_CATEGORY("letternumber", "Nl"),
    TN_CATEGORY("othernumber", "No"),
    TN_CATEGORY("punctuation", "P"),
    TN_CATEGORY("connectorpunctuation", "Pc"),
    TN_CATEGORY("dashpunctuation", "Pd"),
    TN_CATEGORY("openpunctuation", "Ps"),
    TN_CATEGORY("closepunctuation", "Pe"),
    TN_CATEGORY("initialpunctuation", "Pi"),
    TN_CATEGORY("finalpunctuation", "Pf"),
    TN_CATEGORY("otherpunctuation", "Po"),
    TN_CATEGORY("symbol", "S"),
    TN_CATEGORY("mathsymbol", "Sm"),
    TN_CATEGORY("currencysymbol", "Sc"),
    TN_CATEGORY("modifiersymbol", "Sk"),
    TN_CATEGORY("othersymbol", "So"),
    TN_CATEGORY("separator", "Z"),
    TN_CATEGORY("spaceseparator", "Zs"),
    TN_CATEGORY("lineseparator", "Zl"),
    TN_CATEGORY("paragraphseparator", "Zp"),
    TN_CATEGORY("other", "C"),
    TN_CATEGORY("control", "Cc"),
    TN_CATEGORY("format", "Cf"),
    TN_CATEGORY("surrogate", "Cs"),
    TN_CATEGORY("privateuse", "Co"),
    TN_CATEGORY("unassigned", "Cn"),
    // The POSIX bracket names, as Oniguruma's Unicode tables give them.
    TN_CATEGORY("digit", "Nd"),
    TN_CATEGORY("punct", "P"),
    TN_CATEGORY("cntrl", "Cc"),
    {"alnum", "\\p{Alpha}\\p{Nd}", nullptr},
    // Outside a class, Oniguruma's word characters take in Latin-1's superscripts and
    // fractions (No) as well.
    {"word", "\\p{Alpha}\\p{M}\\p{Nd}\\p{Pc}", nullptr,
     "\\p{Alpha}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}"},
    {"blank", "\\t\\p{Zs}", nullptr},
    {"xdigit", "0-9A-Fa-f", nullptr},
    {"graph", "\\p{L}\\p{M}\\p{N}\\p{P}\\p{S}\\p{Cf}\\p{Co}", "\\p{Z}\\p{Cc}\\p{Cs}\\p{Cn}"},
    {"print", "\\p{L}\\p{M}\\p{N}\\p{P}\\p{S}\\p{Cf}\\p{Co}\\p{Zs}",
     "\\p{Zl}\\p{Zp}\\p{Cc}\\p{Cs}\\p{Cn}"},
};
#undef TN_CATEGORY

bool compiles(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) return false;
  pcre2_code_free(code);
  return true;
}

// One item: a lone \p{..} as it is, anything else in brackets.
std::string as_item(const std::string& members, bool negated) {
  const bool single = members.rfind("\\p{", 0) == 0 && members.find('}') == members.size() - 1;
  if (single && !negated) return members;
  return (negated ? "[^" : "[") + members + "]";
}

}  // namespace

std::string pcre2_property(const std::string& escape, bool in_class, const std::string& where) {
  // escape: \p{Name}, \P{Name}, \p{^Name} or \P{^Name} (the last is \p{Name}).
  const bool caret = escape.size() > 3 && escape[3] == '^';
  const bool negated = (escape[1] == 'P') != caret;
  const std::string name = escape.substr(caret ? 4 : 3, escape.size() - (caret ? 5 : 4));
  std::string key;
  for (const char c : name) {
    if (c == ' ' || c == '_' || c == '-') continue;
    if (std::isalnum(static_cast<unsigned char>(c)) == 0)
      TN_THROW(DataError, where, ": ", escape,
               " is not a property name Oniguruma (which tokenizers uses) reads");
    key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (const PropertySet& set : kPropertySets) {
    if (key != set.key) continue;
    if (!in_class) {
      const char* members = set.outside_class != nullptr ? set.outside_class : set.members;
      if (negated && set.complement != nullptr && set.outside_class == nullptr)
        return as_item(set.complement, false);
      return as_item(members, negated);
    }
    if (!negated) return set.members;
    if (set.complement != nullptr) return set.complement;
    TN_THROW(DataError, where, ": ", escape,
             " in a character class is not supported (PCRE2 has no such property; write the "
             "class negated instead)");
  }
  const std::string prefix = negated ? "\\P{" : "\\p{";
  if (!key.empty() && compiles("\\p{sc:" + key + "}")) return prefix + "sc:" + key + "}";
  return prefix + key + "}";  // PCRE2's own name, or a compile error naming the pattern
}

}  // namespace ternion
