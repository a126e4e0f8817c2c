#include "framework/config_reader.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include <yaml-cpp/anchor.h>
#include <yaml-cpp/eventhandler.h>

#include "framework/read_file.h"

namespace ternion {

namespace {

// Where the second document with content starts, if any. yaml-cpp 0.7's LoadAll loops for ever
// (allocating as it goes) on some bad input, ',' for one (github.com/jbeder/yaml-cpp/issues/
// 1040): its parser keeps reporting empty documents. As the upstream fix does, the count stops
// at the first empty document after the first.
class SecondDocument : public YAML::EventHandler {
 public:
  static std::optional<YAML::Mark> find(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    SecondDocument handler;
    for (int document = 0; parser.HandleNextDocument(handler); ++document) {
      if (handler.empty_ && document > 0) break;
      if (document == 1) return handler.root_;
    }
    return std::nullopt;
  }

  void OnDocumentStart(const YAML::Mark&) override { root_.reset(); empty_ = true; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { first(mark, false); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { first(mark, true); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    first(mark, true);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    first(mark, true);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    first(mark, true);
  }
  void OnMapEnd() override {}

 private:
  void first(const YAML::Mark& mark, bool content) {
    if (root_) return;
    root_ = mark;
    empty_ = !content;
  }
  std::optional<YAML::Mark> root_;
  bool empty_ = true;
};

std::string line_of(const std::string& source, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return source;
  return source + ":" + std::to_string(mark.line + 1);
}

// The first line up to `last` (1-based) whose indentation holds a tab, or 0: YAML forbids tabs
// there, and yaml-cpp reports it as an unrelated error ("illegal map value").
int first_tab_indented_line(const std::string& text, int last) {
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; number <= last && std::getline(lines, line); ++number) {
    const std::size_t indent = line.find_first_not_of(" \t");
    if (line.substr(0, indent).find('\t') != std::string::npos) return number;
  }
  return 0;
}

}  // namespace

// yaml-cpp keeps every entry of a map, a repeated key too, and lookups find the first: a
// repeated section or key would silently lose one of its values.
void check_unique_keys(const std::string& source, const YAML::Node& map, const char* what) {
  std::map<std::string, YAML::Mark> seen;
  for (const auto& entry : map) {
    // A list, a map or nothing (~) as a name would read as the empty name.
    TN_CHECK_AS(ConfigError, entry.first.IsScalar() && !entry.first.Scalar().empty(),
                line_of(source, entry.first), ": a ", what, " must be named by a word, got ",
                entry.first.IsSequence() ? "a list" : entry.first.IsMap() ? "a map" : "nothing");
    const std::string key = entry.first.Scalar();
    const auto [first, inserted] = seen.emplace(key, entry.first.Mark());
    TN_CHECK_AS(ConfigError, inserted, line_of(source, entry.first), ": ", what, " '", key,
                "' appears twice (first at line ", first->second.line + 1, ")");
  }
}

ConfigDocument ConfigDocument::parse(const std::string& text, const std::string& source_name) {
  ConfigDocument doc;
  doc.source_name_ = source_name;
  std::optional<YAML::Mark> second;
  try {
    doc.root_ = YAML::Load(text);  // the first document
    second = SecondDocument::find(text);
  } catch (const YAML::ParserException& e) {
    if (const int tab_line = first_tab_indented_line(text, e.mark.line + 1))
      TN_THROW(ConfigError, source_name, ":", tab_line,
               ": a tab in the indentation: YAML indents with spaces only");
    TN_THROW(ConfigError, source_name, ":", e.mark.line + 1, ":", e.mark.column + 1,
             ": invalid YAML: ", e.msg);
  }
  TN_CHECK_AS(ConfigError, !second, source_name, ":", second ? second->line + 1 : 0,
              ": a second YAML document (after '---'): a config is one document");
  if (!doc.root_ || doc.root_.IsNull()) {
    doc.root_ = YAML::Node(YAML::NodeType::Map);  // an empty file is an all-defaults config
  }
  TN_CHECK_AS(ConfigError, doc.root_.IsMap(), line_of(source_name, doc.root_),
              ": a config must be a map of sections (model:, training:, ...)");
  check_unique_keys(source_name, doc.root_, "section");
  for (const auto& entry : doc.root_) {
    const std::string name = entry.first.Scalar();
    TN_CHECK_AS(ConfigError, entry.second.IsMap() || entry.second.IsNull(),
                line_of(source_name, entry.first), ": section '", name,
                "' must be a map of key: value lines");
    if (entry.second.IsMap()) check_unique_keys(source_name, entry.second, "key");
  }
  return doc;
}

ConfigDocument ConfigDocument::parse_resolved(const std::string& text,
                                              const std::string& description) {
  ConfigDocument doc = parse(text, description);
  doc.has_lines_ = false;
  return doc;
}

ConfigDocument ConfigDocument::load_file(const std::string& path) {
  std::string why;
  const std::optional<std::string> text = read_whole_file(path, why);
  TN_CHECK_AS(ConfigError, text.has_value(), "cannot read config file '", path, "': ", why);
  return parse(*text, path);
}

YAML::Node ConfigDocument::section_node(const std::string& section) const {
  // const operator[] on a yaml-cpp map never inserts.
  const YAML::Node& root = root_;
  return root[section];
}

void ConfigDocument::apply_override(const std::string& assignment, const std::string& origin) {
  const auto eq = assignment.find('=');
  const auto dot = assignment.find('.');
  TN_CHECK_AS(UsageError, eq != std::string::npos && dot != std::string::npos && dot < eq &&
                              dot > 0 && eq > dot + 1,
              "--set expects section.key=value, got '", assignment, "'");
  const std::string section = assignment.substr(0, dot);
  const std::string key = assignment.substr(dot + 1, eq - dot - 1);
  const std::string text = assignment.substr(eq + 1);
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::ParserException&) {
    // Not YAML: fine for a string key, which reads override_text; any other key says
    // "expected ..." with this text.
    value = YAML::Node(text);
  }
  if (!root_[section] || root_[section].IsNull()) root_[section] = YAML::Node(YAML::NodeType::Map);
  root_[section][key] = value;
  override_origin_[section + "." + key] = origin.empty() ? "--set " + assignment : origin;
  override_text_[section + "." + key] = text;
}

const std::string* ConfigDocument::override_text(const std::string& section,
                                                 const std::string& key) const {
  auto it = override_text_.find(section + "." + key);
  return it != override_text_.end() ? &it->second : nullptr;
}

std::string ConfigDocument::location(const std::string& section, const std::string& key) const {
  auto it = override_origin_.find(section + "." + key);
  if (it != override_origin_.end()) return it->second;
  YAML::Node node = value(section, key);
  if (!node) return "";
  return has_lines_ ? line_of(source_name_, node) : source_name_;
}

YAML::Node ConfigDocument::value(const std::string& section, const std::string& key) const {
  YAML::Node s = section_node(section);
  if (!s || !s.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& const_section = s;
  return const_section[key];  // may be null (present without a value): the reader reports it
}

void ConfigDocument::declare(const std::string& section, const std::string& key) {
  declared_[section].insert(key);
}

void ConfigDocument::check_all_declared() const {
  for (const auto& entry : root_) {
    const std::string section = entry.first.Scalar();
    auto known = declared_.find(section);
    if (known == declared_.end()) {
      std::string sections;
      for (const auto& [name, keys] : declared_) sections += (sections.empty() ? "" : ", ") + name;
      // A section that only a --set override made is reported where the override is.
      std::string where = line_of(source_name_, entry.first);
      for (const auto& [key, origin] : override_origin_)
        if (key.rfind(section + ".", 0) == 0 && entry.first.Mark().is_null()) where = origin;
      TN_THROW(ConfigError, where, ": unknown section '", section, "' (sections are: ", sections,
               ")");
    }
    if (!entry.second.IsMap()) continue;
    for (const auto& item : entry.second) {
      const std::string key = item.first.Scalar();
      if (known->second.count(key)) continue;
      auto it = override_origin_.find(section + "." + key);
      const std::string where = it != override_origin_.end() ? it->second
                                                              : line_of(source_name_, item.first);
      TN_THROW(ConfigError, where, ": unknown key '", section, ".", key,
               "' (see ternion-train --print-config for every key)");
    }
  }
}

void config_fail(const ConfigDocument& doc, const std::string& section, const std::string& key,
                 const std::string& message) {
  std::string where = doc.location(section, key);
  if (where.empty()) where = doc.source_name() + " (default)";
  TN_THROW(ConfigError, where, ": ", section, ".", key, ": ", message);
}

}  // namespace ternion
