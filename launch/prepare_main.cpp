// ternion-prepare: text -> token files the trainer reads (data/text_prepare.h). --input is a
// file or a glob of them, each decompressed where it is gzip or Zstandard (data/decompress.h).
//
//   ternion-prepare (--input TEXT [--jsonl [--json-key K]] | --builtin [--bytes N])
//                   --output DIR [--val-fraction F]
//                   [--tokenizer FILE | --train-tokenizer --vocab-size N
//                                     [--tokenizer-style gpt2|llama3]]
//                   [--shard-tokens N] [--threads N]
//
// Tokens are bytes unless a byte-level BPE is given (a Hugging Face tokenizer.json) or trained
// on the input; then DIR/tokenizer.json is written beside the token files. With --jsonl the
// input is documents in JSON Lines (data/jsonl_documents.h), each after an end-of-text token.
// --builtin prepares the generated corpus of data/builtin_corpus.h instead of a file and also
// writes DIR/corpus.txt (the text) and DIR/words.txt (its word list, one a line).
//
// Exit status: 0 on success or --help; 2 for a bad command line (the message and a usage hint
// on stderr); 1 for anything else (bad input file, unwritable directory), with one line.
#include <glob.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/builtin_corpus.h"
#include "data/jsonl_documents.h"
#include "data/text_prepare.h"
#include "data/tokenizer.h"
#include "framework/error.h"
#include "framework/logging.h"
#include "training/cli_option_values.h"

namespace {

namespace fs = std::filesystem;
using ternion::DataError;
using ternion::UsageError;

constexpr const char* kProgram = "ternion-prepare";
constexpr const char* kUsageHint =
    "usage: ternion-prepare (--input TEXT [--jsonl [--json-key K]] | --builtin [--bytes N]) "
    "--output DIR [--val-fraction F] [--tokenizer FILE | --train-tokenizer --vocab-size N "
    "[--tokenizer-style gpt2|llama3]] [--shard-tokens N] [--threads N]; see --help";
constexpr const char* kHelp =
    "usage: ternion-prepare --input TEXT --output DIR [options]\n"
    "       ternion-prepare --builtin --output DIR [--bytes N] [options]\n"
    "\n"
    "Tokenizes text into DIR/train.bin and DIR/val.bin (or shards of them), llm.c token files\n"
    "that ternion-train reads: bytes (vocabulary 256) by default, or a byte-level BPE.\n"
    "\n"
    "  --input TEXT        the text file to prepare (UTF-8 for a BPE tokenizer), or a glob of\n"
    "                      them ('data/*.jsonl.gz', quoted; a name that exists is one file),\n"
    "                      read in name order, one after another; gzip and Zstandard files\n"
    "                      are decompressed\n"
    "  --jsonl             the input is documents in JSON Lines, one object a line with the\n"
    "                      text under --json-key; each document follows the tokenizer's\n"
    "                      end-of-text token (<|endoftext|>), or is put between Llama 3's\n"
    "                      <|begin_of_text|> and <|end_of_text|>, so it needs a BPE tokenizer\n"
    "  --json-key K        the key of a document's text (default text)\n"
    "  --builtin           prepare the built-in generated pseudo-English corpus instead; also\n"
    "                      writes DIR/corpus.txt and DIR/words.txt (its words, one a line)\n"
    "  --output DIR        where to write (created if missing)\n"
    "  --bytes N           size of the built-in corpus: whole paragraphs up to at least N\n"
    "                      bytes (default 1048576)\n"
    "  --val-fraction F    the last F of the tokens become the validation split, F in [0, 0.5]\n"
    "                      (default 0.1; with --jsonl, the last documents, nearest that); 0\n"
    "                      writes no validation file\n"
    "  --tokenizer FILE    encode with this Hugging Face tokenizer.json (byte-level BPE, as\n"
    "                      GPT-2's and Llama 3's); a copy goes to DIR/tokenizer.json\n"
    "  --train-tokenizer   train a GPT-2-style byte-level BPE on the text first and write it to\n"
    "                      DIR/tokenizer.json (special token <|endoftext|>); needs --vocab-size\n"
    "  --vocab-size N      the trained tokenizer's vocabulary, at least 257 (258 for llama3)\n"
    "  --tokenizer-style S the trained tokenizer's kind: gpt2 (default: GPT-2's pattern,\n"
    "                      <|endoftext|>) or llama3 (Llama 3's pattern, <|begin_of_text|> and\n"
    "                      <|end_of_text|>, and its template: <|begin_of_text|> before a prompt)\n"
    "  --shard-tokens N    split each split into shards of at most N tokens, sizes within one\n"
    "                      token of each other: DIR/train_000000.bin, ... and DIR/val_000000.bin,\n"
    "                      ... (data.train: DIR/train_*.bin); default: one file per split\n"
    "  --threads N         encoding threads (default: the cores this process may use)\n"
    "  --help              print this and exit\n"
    "\n"
    "Token files hold uint16 tokens where the vocabulary fits them, else uint32. Files of an\n"
    "earlier preparation in DIR that this one does not write are removed.\n";

struct Options {
  std::optional<std::string> input;
  bool jsonl = false;
  std::optional<std::string> json_key;
  bool builtin = false;
  std::optional<std::string> output;
  std::optional<std::int64_t> bytes;
  std::optional<double> val_fraction;
  std::optional<std::string> tokenizer;
  bool train_tokenizer = false;
  std::optional<std::int64_t> vocab_size;
  std::optional<std::string> tokenizer_style;  // gpt2 | llama3
  std::optional<std::int64_t> shard_tokens;
  std::optional<std::int64_t> threads;
};

double parse_fraction(const std::string& flag, const std::string& text) {
  const double value = ternion::cli_number(flag, text);
  TN_CHECK_AS(UsageError, value >= 0.0 && value <= 0.5, flag, " ", text,
              " is outside [0, 0.5]");
  return value;
}

// A whole number in [low, high] (UsageError naming the flag otherwise).
std::int64_t parse_count(const std::string& flag, const std::string& text, std::int64_t low,
                         std::int64_t high) {
  const std::int64_t value = ternion::cli_integer(flag, text);
  TN_CHECK_AS(UsageError, value >= low && value <= high, flag, " ", text, " is outside [", low,
              ", ", high, "]");
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
      // A token file counts its tokens in an int32, and each byte is one token.
      options.bytes = parse_count(flag, value(), 1, std::numeric_limits<std::int32_t>::max());
    } else if (flag == "--tokenizer") {
      once(options.tokenizer.has_value());
      options.tokenizer = value();
      TN_CHECK_AS(UsageError, !options.tokenizer->empty(), "--tokenizer needs a non-empty path");
    } else if (flag == "--train-tokenizer") {
      TN_CHECK_AS(UsageError, !inline_value, "--train-tokenizer takes no value");
      once(options.train_tokenizer);
      options.train_tokenizer = true;
    } else if (flag == "--vocab-size") {
      once(options.vocab_size.has_value());
      options.vocab_size =
          parse_count(flag, value(), 257, std::numeric_limits<std::int32_t>::max());
    } else if (flag == "--tokenizer-style") {
      once(options.tokenizer_style.has_value());
      options.tokenizer_style = value();
      TN_CHECK_AS(UsageError,
                  *options.tokenizer_style == "gpt2" || *options.tokenizer_style == "llama3",
                  "--tokenizer-style must be gpt2 or llama3, got '", *options.tokenizer_style, "'");
    } else if (flag == "--shard-tokens") {
      once(options.shard_tokens.has_value());
      options.shard_tokens =
          parse_count(flag, value(), 1, std::numeric_limits<std::int32_t>::max());
    } else if (flag == "--threads") {
      once(options.threads.has_value());
      options.threads = parse_count(flag, value(), 1, 1024);
    } else if (flag == "--jsonl") {
      TN_CHECK_AS(UsageError, !inline_value, "--jsonl takes no value");
      once(options.jsonl);
      options.jsonl = true;
    } else if (flag == "--json-key") {
      once(options.json_key.has_value());
      options.json_key = value();
      TN_CHECK_AS(UsageError, !options.json_key->empty(), "--json-key needs a non-empty key");
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
  TN_CHECK_AS(UsageError, !(options.tokenizer && options.train_tokenizer),
              "--tokenizer and --train-tokenizer exclude each other");
  TN_CHECK_AS(UsageError, !options.jsonl || options.input.has_value(),
              "--jsonl reads documents from --input");
  TN_CHECK_AS(UsageError, !options.json_key || options.jsonl, "--json-key applies only to --jsonl");
  TN_CHECK_AS(UsageError, !options.jsonl || options.tokenizer || options.train_tokenizer,
              "--jsonl separates documents with an end-of-text token, which bytes have none "
              "of: give --tokenizer FILE or --train-tokenizer --vocab-size N");
  TN_CHECK_AS(UsageError, !options.tokenizer_style || options.train_tokenizer,
              "--tokenizer-style applies only to --train-tokenizer");
  TN_CHECK_AS(UsageError, options.train_tokenizer == options.vocab_size.has_value(),
              options.train_tokenizer ? "--train-tokenizer needs --vocab-size N"
                                      : "--vocab-size applies only to --train-tokenizer");
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

// The cores this process may run on (a cgroup or taskset may allow fewer than the machine has).
int available_cores() {
  cpu_set_t cores;
  CPU_ZERO(&cores);
  if (::sched_getaffinity(0, sizeof cores, &cores) == 0) return std::max(1, CPU_COUNT(&cores));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// The files --input names: one, or those a glob pattern matches, in the byte order of their
// names (a pattern that matches nothing, or a directory, is refused).
std::vector<std::string> input_files(const std::string& spec) {
  std::error_code error;
  TN_CHECK_AS(DataError, !fs::is_directory(spec, error), "--input '", spec,
              "' is a directory: name its files, or a glob of them ('", spec, "/*.jsonl.gz')");
  if (fs::exists(spec, error) || spec.find_first_of("*?[") == std::string::npos) return {spec};
  glob_t matches{};
  const int status = ::glob(spec.c_str(), GLOB_ERR, nullptr, &matches);
  std::vector<std::string> paths(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  ::globfree(&matches);
  TN_CHECK_AS(DataError, status != GLOB_NOMATCH, "--input '", spec, "' matches no file");
  TN_CHECK_AS(DataError, status == 0, "--input '", spec,
              "': cannot read a directory the pattern names");
  std::sort(paths.begin(), paths.end());  // glob sorts by the locale's collation; we by bytes
  return paths;
}

// The tokenizer `opened` from --tokenizer, or bytes, or one trained on `text` (on the
// `documents` of --jsonl, each on its own); `source` names the text.
ternion::Tokenizer tokenizer_for(const Options& options,
                                 const std::optional<ternion::Tokenizer>& opened,
                                 const std::string& text, const std::vector<std::string>& documents,
                                 const std::string& source) {
  if (opened) return *opened;
  if (!options.train_tokenizer) return ternion::Tokenizer::bytes();
  // Each style's own markers (data/tokenizer.h: the documents go between them).
  using Style = ternion::BpeTokenizer::Style;
  const bool llama3 = options.tokenizer_style.value_or("gpt2") == "llama3";
  const Style style = llama3 ? Style::llama3 : Style::gpt2;
  const std::vector<std::string> special =
      llama3 ? std::vector<std::string>{"<|begin_of_text|>", "<|end_of_text|>"}
             : std::vector<std::string>{"<|endoftext|>"};
  if (options.jsonl)
    return ternion::Tokenizer(
        ternion::BpeTokenizer::train(documents, *options.vocab_size, special, style));
  const std::int64_t bad = ternion::first_invalid_utf8(text);
  TN_CHECK_AS(DataError, bad < 0, source, " is not UTF-8 at byte offset ", bad,
              ": a BPE tokenizer is trained on UTF-8 text");
  return ternion::Tokenizer(
      ternion::BpeTokenizer::train(text, *options.vocab_size, special, style));
}

std::string file_list(const std::vector<std::string>& files) {
  if (files.size() == 1) return files.front();
  return std::to_string(files.size()) + " files " + files.front() + " .. " + files.back();
}

int run(const Options& options) {
  const fs::path dir(*options.output);
  ternion::PrepareOptions prepare;
  prepare.val_fraction = options.val_fraction.value_or(0.1);
  prepare.shard_tokens = options.shard_tokens.value_or(0);
  prepare.threads = static_cast<int>(
      options.threads.value_or(available_cores()));
  const std::vector<std::string> inputs =
      options.builtin ? std::vector<std::string>() : input_files(*options.input);
  for (const std::string& input : inputs)
    TN_CHECK_AS(UsageError, !ternion::is_replaced_by_preparation(input, dir), "--input '", input,
                "' is a file that preparing into '", *options.output,
                "' replaces or removes: give another --output");
  std::optional<ternion::Tokenizer> opened;
  if (options.tokenizer) opened = ternion::Tokenizer::open("--tokenizer", *options.tokenizer);
  TN_CHECK_AS(DataError, !options.jsonl || !opened || !opened->document_markers().before.empty(),
              "--tokenizer '", options.tokenizer.value_or(""),
              "' has no end-of-text token (<|endoftext|> or <|end_of_text|>) to separate "
              "--jsonl's documents");
  // The files' text one after another, or the documents of each in turn; each file
  // decompressed where it is gzip or Zstandard.
  std::string text;
  std::vector<std::string> documents;
  if (options.builtin) text = ternion::builtin_corpus_text(options.bytes.value_or(1 << 20));
  for (const std::string& input : inputs) {
    if (!options.jsonl) {
      const std::string more = ternion::read_text_file(input);
      // Checked file by file, so the message names the file (the text is checked whole later).
      const std::int64_t bad = ternion::first_invalid_utf8(more);
      TN_CHECK_AS(DataError, bad < 0 || (!options.tokenizer && !options.train_tokenizer),
                  "text file '", input, "' is not UTF-8 at byte offset ", bad,
                  ": a BPE tokenizer encodes UTF-8 text (convert it, e.g. with iconv)");
      text += more;
      continue;
    }
    std::vector<std::string> more =
        ternion::read_jsonl_documents(ternion::read_text_file(input),
                                      options.json_key.value_or("text"), "--input '" + input + "'");
    documents.insert(documents.end(), std::make_move_iterator(more.begin()),
                     std::make_move_iterator(more.end()));
  }
  const auto document_count = static_cast<std::int64_t>(documents.size());
  std::size_t input_bytes = text.size();
  for (const std::string& document : documents) input_bytes += document.size();
  const std::string files = inputs.size() == 1
                                ? "'" + inputs.front() + "'"
                                : "the " + std::to_string(inputs.size()) + " files of '" +
                                      options.input.value_or("") + "'";
  const std::string source = options.builtin      ? "the text"
                             : options.jsonl      ? "the documents of " + files
                             : inputs.size() == 1 ? "text file " + files
                                                  : "the text of " + files;
  prepare.tokenizer = tokenizer_for(options, opened, text, documents, source);
  if (options.jsonl) prepare.document_start = prepare.tokenizer.begin_of_text_id();
  ternion::PrepareResult result;
  if (options.jsonl) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<std::int32_t> tokens =
        ternion::encode_documents(prepare.tokenizer, std::move(documents), prepare.threads);
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    result = ternion::prepare_tokens(tokens, *options.output, prepare, source, seconds.count());
  } else {
    result = ternion::prepare_text(text, *options.output, prepare, source);
  }
  std::string extra;
  if (options.builtin) {
    const std::vector<std::string> words = ternion::builtin_corpus_words();
    std::string word_lines;
    for (const std::string& word : words) word_lines += word + "\n";
    write_text(dir / "corpus.txt", text);
    write_text(dir / "words.txt", word_lines);
    extra = "; text in " + (dir / "corpus.txt").string() + ", " + std::to_string(words.size()) +
            " words in " + (dir / "words.txt").string();
  }

  std::cout << "wrote " << file_list(result.train_files) << " (" << result.train_tokens
            << " tokens)";
  if (result.val_tokens > 0) {
    std::cout << " and " << file_list(result.val_files) << " (" << result.val_tokens
              << " tokens)";
  } else {
    std::cout << " and no validation file (--val-fraction 0)";
  }
  if (!prepare.tokenizer.is_bytes())
    std::cout << "; " << prepare.tokenizer.describe() << " in "
              << (dir / "tokenizer.json").string();
  const ternion::Tokenizer::DocumentMarkers markers = prepare.tokenizer.document_markers();
  if (options.jsonl)
    std::cout << "; " << ternion::count_of(document_count, "document", "documents")
              << (markers.after.empty()
                      ? ", each after " + markers.before
                      : ", each between " + markers.before + " and " + markers.after)
              << (result.val_documents > 0
                      ? ", the last " + std::to_string(result.val_documents) + " for validation"
                      : "");
  std::cout << extra << "\n";
  const double mb = static_cast<double>(input_bytes) / 1e6;
  const double seconds = std::max(result.encode_seconds, 1e-9);
  std::cout << "encoded " << mb << " MB into " << result.train_tokens + result.val_tokens
            << " tokens in " << result.encode_seconds << " s (" << mb / seconds << " MB/s, "
            << ternion::count_of(prepare.threads, "thread", "threads") << ")\n";
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
