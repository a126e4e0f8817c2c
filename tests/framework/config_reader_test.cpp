#include "framework/config_reader.h"

#include <gtest/gtest.h>

#include <sstream>

namespace ternion {
namespace {

struct Section {
  std::int64_t count = 3;
  double rate = 0.5;
  bool flag = false;
  std::string name = "x";
  template <class V>
  void visit(V& v) {
    v("count", count, "a count");
    v("rate", rate, "a rate");
    v("flag", flag, "a flag");
    v("name", name, "a name");
  }
};

// Runs `body` and returns the ConfigError's message ("" if none was thrown).
template <class F>
std::string config_error(F body) {
  try {
    body();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

Section read(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  ConfigDocument doc = ConfigDocument::parse(yaml, "test.yaml");
  for (const auto& o : overrides) doc.apply_override(o);
  Section s;
  read_config_section(doc, "sec", s);
  doc.check_all_declared();
  return s;
}

TEST(ConfigReader, ReadsTypedValuesAndKeepsDefaults) {
  Section s = read("sec:\n  count: 7\n  flag: true\n");
  EXPECT_EQ(s.count, 7);
  EXPECT_TRUE(s.flag);
  EXPECT_EQ(s.rate, 0.5);
  EXPECT_EQ(s.name, "x");
  EXPECT_EQ(read("").count, 3);  // an empty file is all defaults
}

TEST(ConfigReader, OverridesReplaceFileValues) {
  Section s = read("sec:\n  count: 7\n", {"sec.count=9", "sec.rate=1e-3", "sec.name=hello"});
  EXPECT_EQ(s.count, 9);
  EXPECT_DOUBLE_EQ(s.rate, 1e-3);
  EXPECT_EQ(s.name, "hello");
}

// A key set twice takes the last --set, and errors name that one.
TEST(ConfigReader, TheLastOverrideOfAKeyWins) {
  EXPECT_EQ(read("sec:\n  count: 7\n", {"sec.count=9", "sec.count=11"}).count, 11);
  EXPECT_EQ(read("", {"sec.name=a b", "sec.name=c"}).name, "c");
  const std::string msg = config_error([] { read("", {"sec.count=1", "sec.count=x"}); });
  EXPECT_NE(msg.find("--set sec.count=x"), std::string::npos) << msg;
}

// A string key takes its --set text as typed; YAML would refuse the first, drop the second's
// trailing space and read the third as a comment. Other keys still read YAML scalars.
TEST(ConfigReader, StringOverridesAreTakenLiterally) {
  EXPECT_EQ(read("", {"sec.name=ROMEO: hi"}).name, "ROMEO: hi");
  EXPECT_EQ(read("", {"sec.name=The "}).name, "The ");
  EXPECT_EQ(read("", {"sec.name=#x"}).name, "#x");
  EXPECT_EQ(read("", {"sec.name=[a, b"}).name, "[a, b");
  EXPECT_EQ(read("sec:\n  name: file\n", {"sec.name=\"quoted\""}).name, "\"quoted\"");
  EXPECT_EQ(read("", {"sec.count=12"}).count, 12);
  std::string msg = config_error([] { read("", {"sec.count=[1, 2"}); });
  EXPECT_NE(msg.find("--set sec.count=[1, 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("an integer"), std::string::npos) << msg;
}

TEST(ConfigReader, UnknownKeyNamesKeyAndLine) {
  std::string msg = config_error([] { read("sec:\n  count: 7\n  cuont: 8\n"); });
  EXPECT_NE(msg.find("test.yaml:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sec.cuont"), std::string::npos) << msg;
}

TEST(ConfigReader, UnknownSectionNamesLine) {
  std::string msg = config_error([] { read("sec:\n  count: 7\nmodle:\n  x: 1\n"); });
  EXPECT_NE(msg.find("test.yaml:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("modle"), std::string::npos) << msg;
}

TEST(ConfigReader, WrongTypesNameKeyLineAndValue) {
  std::string msg = config_error([] { read("sec:\n  count: seven\n"); });
  EXPECT_NE(msg.find("test.yaml:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sec.count"), std::string::npos) << msg;
  EXPECT_NE(msg.find("an integer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("seven"), std::string::npos) << msg;
  EXPECT_NE(config_error([] { read("sec:\n  count: 1.5\n"); }), "");
  EXPECT_NE(config_error([] { read("sec:\n  rate: \"0.1\"\n"); }), "");  // quoted: a string
  // Tagged as another type: not read as the field's, whatever it spells; its own type's tag is.
  EXPECT_NE(config_error([] { read("sec:\n  count: !!str 3\n"); })
                .find("expected an integer, got '3' tagged !!str"),
            std::string::npos);
  EXPECT_NE(config_error([] { read("sec:\n  rate: !mine 0.1\n"); }).find("tagged !mine"),
            std::string::npos);
  EXPECT_EQ(read("sec:\n  count: !!int 3\n").count, 3);
  EXPECT_EQ(read("sec:\n  rate: !!int 1\n").rate, 1.0);
  EXPECT_NE(config_error([] { read("sec:\n  flag: maybe\n"); }), "");
  EXPECT_NE(config_error([] { read("sec:\n  count: [1, 2]\n"); }), "");
  EXPECT_NE(config_error([] { read("sec:\n  count:\n"); }).find("has no value"), std::string::npos);
  EXPECT_EQ(read("sec:\n  name:\n").name, "");  // an empty string is a value for strings
  EXPECT_EQ(read("", {"sec.name="}).name, "");
}

// A key that is not a word (a list, nothing) would read as the empty name: refused where it is.
TEST(ConfigReader, KeysAreWords) {
  EXPECT_EQ(config_error([] { read("sec:\n  [a, b]: 1\n"); }),
            "test.yaml:2: a key must be named by a word, got a list");
  EXPECT_EQ(config_error([] { read("sec:\n  ~: 1\n"); }),
            "test.yaml:2: a key must be named by a word, got nothing");
  EXPECT_EQ(config_error([] { read("~:\n  count: 1\n"); }),
            "test.yaml:1: a section must be named by a word, got nothing");
}

TEST(ConfigReader, OverrideErrorsNameTheOverride) {
  std::string msg = config_error([] { read("", {"sec.count=abc"}); });
  EXPECT_NE(msg.find("--set sec.count=abc"), std::string::npos) << msg;
  msg = config_error([] { read("", {"sec.nope=1"}); });
  EXPECT_NE(msg.find("--set sec.nope=1"), std::string::npos) << msg;
  msg = config_error([] { read("sec:\n  count: 1\n", {"sce.count=4"}); });
  EXPECT_NE(msg.find("--set sce.count=4: unknown section 'sce'"), std::string::npos) << msg;
  EXPECT_THROW(read("", {"nodot=1"}), UsageError);
  EXPECT_THROW(read("", {"sec.count"}), UsageError);
}

TEST(ConfigReader, BrokenYamlNamesLine) {
  std::string msg = config_error([] { read("sec:\n  count: [1, 2\n  rate: 3\n"); });
  EXPECT_NE(msg.find("test.yaml:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid YAML"), std::string::npos) << msg;
  EXPECT_NE(config_error([] { read("- a\n- b\n"); }).find("map of sections"), std::string::npos);
  EXPECT_NE(config_error([] { read("sec: 5\n"); }).find("must be a map"), std::string::npos);
}

TEST(ConfigReader, ATabInTheIndentationIsNamed) {
  std::string msg = config_error([] { read("sec:\n  count: 7\n\trate: 3\n"); });
  EXPECT_NE(msg.find("test.yaml:3: a tab in the indentation: YAML indents with spaces only"),
            std::string::npos)
      << msg;
}

TEST(ConfigReader, MissingFileIsAConfigError) {
  std::string msg = config_error([] { ConfigDocument::load_file("/nonexistent/x.yaml"); });
  EXPECT_NE(msg.find("/nonexistent/x.yaml"), std::string::npos) << msg;
  msg = config_error([] { ConfigDocument::load_file("/tmp"); });
  EXPECT_NE(msg.find("'/tmp': is a directory"), std::string::npos) << msg;
}

// yaml-cpp keeps repeated keys and answers lookups with the first: each would lose a value.
TEST(ConfigReader, RepeatedKeysSectionsAndDocumentsAreRefused) {
  std::string msg = config_error([] { read("sec:\n  count: 4\n  count: 3\n"); });
  EXPECT_NE(msg.find("test.yaml:3: key 'count' appears twice (first at line 2)"),
            std::string::npos) << msg;
  msg = config_error([] { read("sec:\n  count: 4\nsec:\n  rate: 1\n"); });
  EXPECT_NE(msg.find("test.yaml:3: section 'sec' appears twice (first at line 1)"),
            std::string::npos) << msg;
  msg = config_error([] { read("sec:\n  count: 4\n---\nsec:\n  count: 5\n"); });
  EXPECT_NE(msg.find("a second YAML document"), std::string::npos) << msg;
  EXPECT_EQ(read("---\nsec:\n  count: 4\n").count, 4);  // one document, marked, is fine
  EXPECT_EQ(read("sec:\n  count: 4\n---\n").count, 4);  // an empty second one is no content
}

// Input on which yaml-cpp 0.7's LoadAll loops for ever, allocating (found by fuzz/): read as
// the empty config it parses to, at once.
TEST(ConfigReader, InputThatLoopsYamlCppsLoadAllEnds) {
  for (const char* text : {",", ",##", "\n,\n"}) EXPECT_EQ(read(text).count, Section().count);
}

TEST(ConfigReader, IntegersAreDecimalAndInRange) {
  EXPECT_EQ(read("sec:\n  count: 010\n").count, 10);  // YAML 1.2: not octal 8
  EXPECT_EQ(read("sec:\n  count: +12\n").count, 12);
  EXPECT_EQ(read("sec:\n  count: -12\n").count, -12);
  EXPECT_EQ(read("", {"sec.count=0009"}).count, 9);
  EXPECT_NE(config_error([] { read("sec:\n  count: 0x10\n"); }).find("expected an integer"),
            std::string::npos);
  EXPECT_NE(config_error([] { read("sec:\n  count: 99999999999999999999\n"); }), "");
  EXPECT_NE(config_error([] { read("sec:\n  count: 1e6\n"); }), "");
  EXPECT_NE(config_error([] { read("sec:\n  count: +\n"); }), "");
}

TEST(ConfigReader, NumbersAreFinite) {
  for (const char* value : {".inf", "-.inf", ".nan", ".NaN", "1e400"}) {
    const std::string msg = config_error([&] { read("", {std::string("sec.rate=") + value}); });
    EXPECT_NE(msg.find("sec.rate"), std::string::npos) << value << ": " << msg;
  }
  EXPECT_NE(config_error([] { read("sec:\n  rate: .inf\n"); }).find("must be a finite number"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(read("sec:\n  rate: 1e300\n").rate, 1e300);
  // An underflow to 0 is refused; 0 written as 0 is 0.
  EXPECT_NE(config_error([] {
              read("sec:\n  rate: 1e-400\n");
            }).find("sec.rate: '1e-400' is too small for a double: it would read as 0"),
            std::string::npos);
  EXPECT_EQ(read("sec:\n  rate: 0.0e-400\n").rate, 0.0);
  EXPECT_EQ(read("sec:\n  rate: -0\n").rate, 0.0);
}

TEST(ConfigReader, FailNamesWhereTheValueCameFrom) {
  ConfigDocument doc = ConfigDocument::parse("sec:\n  count: 7\n", "f.yaml");
  std::string msg = config_error([&] { config_fail(doc, "sec", "count", "too big"); });
  EXPECT_EQ(msg, "f.yaml:2: sec.count: too big");
  msg = config_error([&] { config_fail(doc, "sec", "rate", "bad default"); });
  EXPECT_EQ(msg, "f.yaml (default): sec.rate: bad default");
}

TEST(ConfigPrinter, PrintsEveryKeyWithItsDocumentation) {
  std::ostringstream out;
  print_config_section(out, "sec", Section{});
  const std::string text = out.str();
  for (const char* piece : {"sec:", "count: 3", "# a count", "flag: false", "name: \"x\""})
    EXPECT_NE(text.find(piece), std::string::npos) << piece << " in\n" << text;
  // What it prints reads back as the defaults.
  Section s = read(text);
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.name, "x");
}

// A printed config is that config: each double as the shortest text that reads back as it.
TEST(ConfigPrinter, DoublesReadBackExactly) {
  for (const double rate : {0.0031234567, 1.0 / 3, 1e-8, 2.0, 6.02214076e23}) {
    Section in;
    in.rate = rate;
    std::ostringstream out;
    print_config_section(out, "sec", in);
    EXPECT_EQ(read(out.str()).rate, rate) << out.str();
  }
}

// Keys the rest of a config leaves unused print commented out, and are refused where they are
// off their defaults: a value given there would be ignored.
TEST(ConfigPrinter, UnusedKeysAreCommentedOutAndRefusedOffTheirDefaults) {
  std::ostringstream out;
  print_config_section(out, "sec", Section{}, {"flag", "rate"});
  const std::string text = out.str();
  EXPECT_NE(text.find("\n  # flag: false"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  count: 3"), std::string::npos) << text;

  auto refusal = [](const std::string& yaml) {
    ConfigDocument doc = ConfigDocument::parse(yaml, "test.yaml");
    Section s;
    read_config_section(doc, "sec", s);
    return config_error([&] { refuse_unused_keys(doc, "sec", s, {"flag", "rate"}, "unused"); });
  };
  EXPECT_EQ(refusal("sec:\n  count: 7\n  flag: false\n  rate: 0.5\n"), "");
  EXPECT_EQ(refusal("sec:\n  count: 7\n  flag: true\n"), "test.yaml:3: sec.flag: unused");
  EXPECT_EQ(refusal("sec:\n  rate: 0.50000001\n"), "test.yaml:2: sec.rate: unused");
}

}  // namespace
}  // namespace ternion
