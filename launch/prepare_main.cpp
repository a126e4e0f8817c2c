// ternion-prepare: text -> byte-token files the trainer reads.
//
//   ternion-prepare --input TEXT --output DIR [--val-fraction F]
//   ternion-prepare --builtin --output DIR [--bytes N] [--val-fraction F]
//
// Writes DIR/train.bin and DIR/val.bin (llm.c token files, byte vocabulary 256; the last F of
// the text, default 0.1, is the validation split; F = 0 writes no val.bin). --builtin prepares
// the generated corpus of data/builtin_corpus.h instead of a file and also writes
// DIR/corpus.txt (the text) and DIR/words.txt (its word list, one a line).
//
// Exit status: 0 on success or --help; 2 for a bad command line (the message and a usage hint
// on stderr); 1 for anything else (bad input file, unwritable directory), with one line.
// Arguments are parsed by hand: the program must build with nothing beyond the standard library.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "data/builtin_corpus.h"
#include "data/text_prepare.h"
#include "framework/error.h"

namespace {

namespace fs = std::filesystem;
using ternion::DataError;
using ternion::UsageError;

constexpr const char* kProgram = "ternion-prepare";
constexpr const char* kUsageHint =
    "usage: ternion-prepare (--input TEXT | --builtin [--bytes N]) --output DIR "
    "[--val-fraction F]; see --help";
constexpr const char* kHelp =
    "usage: ternion-prepare --input TEXT --output DIR [--val-fraction F]\n"
    "       ternion-prepare --builtin --output DIR [--bytes N] [--val-fraction F]\n"
    "\n"
    "Byte-tokenizes text (vocabulary 256) into DIR/train.bin and DIR/val.bin, llm.c token\n"
    "files that ternion-train reads.\n"
    "\n"
    "  --input TEXT        the text file to prepare\n"
    "  --builtin           prepare the built-in generated pseudo-English corpus instead; also\n"
    "                      writes DIR/corpus.txt and DIR/words.txt (its words, one a line)\n"
    "  --output DIR        where to write (created if missing)\n"
    "  --bytes N           size of the built-in corpus: whole paragraphs up to at least N\n"
    "                      bytes (default 1048576)\n"
    "  --val-fraction F    the last F of the text becomes val.bin, F in [0, 0.5] (default 0.1);\n"
    "                      0 writes no val.bin\n"
    "  --help              print this and exit\n";

struct Options {
  std::optional<std::string> input;
  bool builtin = false;
  std::optional<std::string> output;
  std::optional<std::int64_t> bytes;
  std::optional<double> val_fraction;
};

double parse_fraction(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  TN_CHECK_AS(UsageError, !text.empty() && *end == '\0' && errno == 0 && std::isfinite(value),
              flag, ": '", text, "' is not a number");
  TN_CHECK_AS(UsageError, value >= 0.0 && value <= 0.5, flag, " ", text,
              " is outside [0, 0.5]");
  return value;
}

std::int64_t parse_bytes(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  TN_CHECK_AS(UsageError, !text.empty() && *end == '\0', flag, ": '", text,
              "' is not a whole number");
  TN_CHECK_AS(UsageError, errno != ERANGE, flag, " ", text, " is out of range");
  // A token file counts its tokens in an int32, and each byte is one token.
  constexpr long long kMaxBytes = std::numeric_limits<std::int32_t>::max();
  TN_CHECK_AS(UsageError, value > 0 && value <= kMaxBytes, flag, " ", text,
              " is outside [1, ", kMaxBytes, "]");
  return value;
}

// Returns nullopt for --help.
std::optional<Options> parse_args(const std::vector<std::string>& args) {
  for (const std::string& arg : args)
    if (arg == "--help" || arg == "-h") return std::nullopt;

  Options options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;  // --flag=value
    if (std::size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      TN_CHECK_AS(UsageError, i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0, flag,
                  " needs a value");
      return args[++i];
    };
    auto once = [&](bool already_set) {
      TN_CHECK_AS(UsageError, !already_set, flag, " given twice");
    };

    if (flag == "--input") {
      once(options.input.has_value());
      options.input = value();
      TN_CHECK_AS(UsageError, !options.input->empty(), "--input needs a non-empty path");
    } else if (flag == "--output") {
      once(options.output.has_value());
      options.output = value();
      TN_CHECK_AS(UsageError, !options.output->empty(), "--output needs a non-empty path");
    } else if (flag == "--val-fraction") {
      once(options.val_fraction.has_value());
      options.val_fraction = parse_fraction(flag, value());
    } else if (flag == "--bytes") {
      once(options.bytes.has_value());
      options.bytes = parse_bytes(flag, value());
    } else if (flag == "--builtin") {
      TN_CHECK_AS(UsageError, !inline_value, "--builtin takes no value");
      once(options.builtin);
      options.builtin = true;
    } else if (flag.rfind("-", 0) == 0) {
      TN_THROW(UsageError, "unknown option '", args[i], "'");
    } else {
      TN_THROW(UsageError, "unexpected argument '", args[i], "'");
    }
  }

  TN_CHECK_AS(UsageError, options.input || options.builtin,
              "give the text to prepare: --input TEXT or --builtin");
  TN_CHECK_AS(UsageError, !(options.input && options.builtin),
              "--input and --builtin exclude each other");
  TN_CHECK_AS(UsageError, options.output.has_value(), "--output DIR is required");
  TN_CHECK_AS(UsageError, !options.bytes || options.builtin,
              "--bytes applies only to --builtin");
  return options;
}

// Writes `text` to `path` through a temporary file and a rename, like the token files.
void write_text(const fs::path& path, const std::string& text) {
  const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      TN_THROW(DataError, "cannot write '", path.string(), "'");
    }
  }
  std::error_code error;
  fs::rename(tmp, path, error);
  if (error) {
    fs::remove(tmp, error);
    TN_THROW(DataError, "cannot write '", path.string(), "': rename failed: ", error.message());
  }
}

int run(const Options& options) {
  const double val_fraction = options.val_fraction.value_or(0.1);
  const fs::path dir(*options.output);
  ternion::PrepareResult result;
  std::string extra;
  if (options.builtin) {
    const std::string text = ternion::builtin_corpus_text(options.bytes.value_or(1 << 20));
    result = ternion::prepare_text(text, *options.output, val_fraction);
    const std::vector<std::string> words = ternion::builtin_corpus_words();
    std::string word_lines;
    for (const std::string& word : words) word_lines += word + "\n";
    write_text(dir / "corpus.txt", text);
    write_text(dir / "words.txt", word_lines);
    extra = "; text in " + (dir / "corpus.txt").string() + ", " + std::to_string(words.size()) +
            " words in " + (dir / "words.txt").string();
  } else {
    result = ternion::prepare_text_file(*options.input, *options.output, val_fraction);
  }

  std::cout << "wrote " << (dir / "train.bin").string() << " (" << result.train_tokens
            << " tokens)";
  if (result.val_tokens > 0) {
    std::cout << " and " << (dir / "val.bin").string() << " (" << result.val_tokens
              << " tokens)";
  } else {
    std::cout << " and no val.bin (--val-fraction 0)";
  }
  std::cout << extra << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::optional<Options> options = parse_args(std::vector<std::string>(argv + 1, argv + argc));
    if (!options) {
      std::cout << kHelp;
      return 0;
    }
    return run(*options);
  } catch (const UsageError& e) {
    std::cerr << kProgram << ": error: " << e.what() << "\n" << kUsageHint << "\n";
    return 2;
  } catch (const ternion::Error& e) {
    std::cerr << kProgram << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << kProgram << ": error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << kProgram << ": error: unknown exception\n";
    return 1;
  }
}
