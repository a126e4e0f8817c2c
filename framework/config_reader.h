// Reading YAML configs: typed fields, documented defaults, and errors that name the key and
// the line.
//
// A config is a YAML map of sections (`model:`, `training:` ...), each a map of keys. Each
// section is a plain struct whose `visit(v)` lists its fields once:
//
//   struct ModelConfig {
//     std::int64_t n_layer = 12;
//     template <class V> void visit(V& v) { v("n_layer", n_layer, "transformer blocks"); }
//   };
//
// The same list drives reading (ConfigReader), the printed schema (`--print-config`) and
// unknown-key detection, so a key cannot be read without being documented. Overrides from the
// command line (`--set model.n_layer=4`) are YAML scalars placed over the file's values.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "framework/error.h"

namespace ternion {

class ConfigDocument {
 public:
  // ConfigError for a missing or unreadable file or broken YAML (with its line).
  static ConfigDocument load_file(const std::string& path);
  static ConfigDocument parse(const std::string& text, const std::string& source_name);
  // A config a program resolved itself (config_yaml's text): messages name `description`
  // alone, as its lines are no lines of any file the user has.
  static ConfigDocument parse_resolved(const std::string& text, const std::string& description);

  // "section.key=value"; UsageError if malformed. The value is read as a YAML scalar, except by
  // a string key, which takes the text after '=' as it is (override_text). Messages place the
  // value at `origin`, "--set ASSIGNMENT" if empty (a program's own option that sets the key).
  void apply_override(const std::string& assignment, const std::string& origin = "");
  // The text a --set gave section.key, or null where none did.
  const std::string* override_text(const std::string& section, const std::string& key) const;

  // Where a key's value came from: "FILE:LINE", "--set model.n_layer=4", or "" when defaulted.
  std::string location(const std::string& section, const std::string& key) const;
  YAML::Node value(const std::string& section, const std::string& key) const;  // null if absent

  // Called by readers: this key is part of the schema.
  void declare(const std::string& section, const std::string& key);
  // ConfigError naming the first key (or section) present in the document but never declared.
  void check_all_declared() const;

  const std::string& source_name() const { return source_name_; }

 private:
  YAML::Node section_node(const std::string& section) const;
  std::string source_name_;
  bool has_lines_ = true;  // false: parse_resolved
  YAML::Node root_;
  std::map<std::string, std::string> override_origin_;  // "section.key" -> "--set ..."
  std::map<std::string, std::string> override_text_;    // "section.key" -> the text after '='

  std::map<std::string, std::set<std::string>> declared_;
};

// ConfigError "SOURCE:LINE: <what> 'KEY' appears twice (first at line N)" where `map` holds a
// key twice: yaml-cpp keeps both and lookups find the first. ConfigDocument checks its
// sections and keys with it; other YAML readers (planner/cluster_spec.cpp) their maps.
void check_unique_keys(const std::string& source, const YAML::Node& map, const char* what);

// Thrown for a value that is present but wrong; names the key and where it came from.
[[noreturn]] void config_fail(const ConfigDocument& doc, const std::string& section,
                              const std::string& key, const std::string& message);

namespace detail {
template <class T> const char* config_type_name();
template <> inline const char* config_type_name<std::int64_t>() { return "an integer"; }
template <> inline const char* config_type_name<double>() { return "a number"; }
template <> inline const char* config_type_name<bool>() { return "true or false"; }
template <> inline const char* config_type_name<std::string>() { return "a string"; }

// An optional sign and decimal digits, within int64 (leading zeros are decimal too).
inline bool parse_decimal(const std::string& text, std::int64_t& value) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') ++first;  // from_chars takes '-' only
  const auto [end, error] = std::from_chars(first, last, value);
  return error == std::errc() && end == last && first != last;
}
}  // namespace detail

// Reads one section's fields from a document.
class ConfigReader {
 public:
  ConfigReader(ConfigDocument& doc, std::string section)
      : doc_(doc), section_(std::move(section)) {}

  template <class T>
  void operator()(const char* key, T& field, const char* /*doc*/) {
    doc_.declare(section_, key);
    if constexpr (std::is_same_v<T, std::string>) {
      // A string from --set is its text, as typed: YAML would refuse "ROMEO: hi", drop the
      // space of "The " and read "#x" as a comment.
      if (const std::string* text = doc_.override_text(section_, key)) {
        field = *text;
        return;
      }
    }
    YAML::Node node = doc_.value(section_, key);
    if (!node) return;  // absent: keep the default
    if (node.IsNull()) {
      // `key:` (or --set section.key=) with nothing after it: an empty string for strings,
      // a mistake for every other type.
      if constexpr (std::is_same_v<T, std::string>) {
        field.clear();
        return;
      }
      config_fail(doc_, section_, key,
                  std::string("has no value (expected ") + detail::config_type_name<T>() + ")");
    }
    if (!node.IsScalar()) config_fail(doc_, section_, key, std::string("expected ") +
                                                               detail::config_type_name<T>());
    if constexpr (std::is_same_v<T, std::string>) {
      field = node.Scalar();
    } else {
      T parsed{};
      // A quoted scalar ("3", tag "!") or one tagged as another type (!!str 3, !custom 3) is
      // not a number or a bool, whatever it spells: only a plain one (tag "?") or one tagged
      // as the field's own type is read.
      const std::string& tag = node.Tag();
      std::string own = "tag:yaml.org,2002:bool";
      if constexpr (std::is_same_v<T, std::int64_t>) own = "tag:yaml.org,2002:int";
      if constexpr (std::is_same_v<T, double>) own = "tag:yaml.org,2002:float";
      bool ok = tag == "?" || tag == own ||
                (std::is_same_v<T, double> && tag == "tag:yaml.org,2002:int");
      if constexpr (std::is_same_v<T, std::int64_t>) {
        // Decimal, as YAML 1.2 reads it: yaml-cpp would take 010 as octal 8 and 0x10 as 16.
        ok = ok && detail::parse_decimal(node.Scalar(), parsed);
      } else {
        ok = ok && YAML::convert<T>::decode(node, parsed);
      }
      if (!ok) {
        const std::string core = "tag:yaml.org,2002:";  // written !!str, !!int, ...
        const std::string written = tag.rfind(core, 0) == 0 ? "!!" + tag.substr(core.size()) : tag;
        config_fail(doc_, section_, key,
                    std::string("expected ") + detail::config_type_name<T>() + ", got '" +
                        node.Scalar() + "'" +
                        (tag == "?" || tag == "!" ? "" : " tagged " + written));
      }
      if constexpr (std::is_same_v<T, double>) {
        if (!std::isfinite(parsed))
          config_fail(doc_, section_, key, "must be a finite number, got '" + node.Scalar() + "'");
        // 1e-400 reads as 0, which means "none" for many keys: a value, not a silent default.
        const std::string& text = node.Scalar();
        if (parsed == 0 && text.substr(0, text.find_first_of("eE")).find_first_of("123456789") !=
                               std::string::npos)
          config_fail(doc_, section_, key,
                      "'" + text + "' is too small for a double: it would read as 0");
      }
      field = parsed;
    }
  }

 private:
  ConfigDocument& doc_;
  std::string section_;
};

// Writes one section's fields, their values and their documentation as YAML.
class ConfigPrinter {
 public:
  // `unused`: keys the rest of the config leaves unused (another model family's, say), printed
  // commented out: the config refuses them where given.
  explicit ConfigPrinter(std::ostream& out, std::set<std::string> unused = {})
      : out_(out), unused_(std::move(unused)) {}
  template <class T>
  void operator()(const char* key, const T& field, const char* doc) {
    std::ostringstream value;
    if constexpr (std::is_same_v<T, bool>) {
      value << (field ? "true" : "false");
    } else if constexpr (std::is_same_v<T, std::string>) {
      YAML::Emitter emitter;  // quotes what needs quoting ("" and trailing spaces, say)
      emitter << YAML::DoubleQuoted << field;
      value << emitter.c_str();
    } else if constexpr (std::is_same_v<T, double>) {
      // The shortest text that reads back as the same double: a printed config is that config.
      char text[32];
      const auto written = std::to_chars(text, text + sizeof text, field);
      value << std::string_view(text, static_cast<std::size_t>(written.ptr - text));
      if (value.str().find_first_of(".eE") == std::string::npos) value << ".0";
    } else {
      value << field;
    }
    out_ << (unused_.count(key) > 0 ? "  # " : "  ") << key << ": " << value.str();
    for (std::size_t pad = std::string(key).size() + value.str().size(); pad < 30; ++pad)
      out_ << ' ';
    out_ << "  # " << doc << '\n';
  }

 private:
  std::ostream& out_;
  std::set<std::string> unused_;
};

// Reads section `name` of `doc` into `config` through its visit().
template <class Config>
void read_config_section(ConfigDocument& doc, const std::string& name, Config& config) {
  ConfigReader reader(doc, name);
  config.visit(reader);
}

namespace detail {
// Each key's value as text, to compare a section with its defaults.
struct ConfigValueRecorder {
  std::map<std::string, std::string>& values;
  template <class T>
  void operator()(const char* key, const T& field, const char* /*doc*/) {
    std::ostringstream text;
    text.precision(17);
    text << field;
    values[key] = text.str();
  }
};
}  // namespace detail

// Refuses the first of `keys` whose value in `config` (section `section` of `doc`) is not its
// default, with `message`: keys the rest of the config leaves unused, whose values would
// otherwise be ignored without a word. A default value changes nothing, so it passes (a saved
// config writes every key).
template <class Config>
void refuse_unused_keys(const ConfigDocument& doc, const std::string& section, Config config,
                        const std::vector<std::string>& keys, const std::string& message) {
  std::map<std::string, std::string> ours, defaults;
  detail::ConfigValueRecorder ours_recorder{ours}, defaults_recorder{defaults};
  config.visit(ours_recorder);
  Config fresh{};
  fresh.visit(defaults_recorder);
  for (const std::string& key : keys)
    if (ours.at(key) != defaults.at(key)) config_fail(doc, section, key, message);
}

template <class Config>
void print_config_section(std::ostream& out, const std::string& name, Config config,
                          std::set<std::string> unused = {}) {
  out << name << ":\n";
  ConfigPrinter printer(out, std::move(unused));
  config.visit(printer);
}

}  // namespace ternion
