// ternion_bpe_tool: the BPE tokenizer from the command line, for the comparison with Hugging
// Face's `tokenizers` (bpe_hf_compare.py) and for timing.
//   ternion_bpe_tool encode TOKENIZER.json TEXT_FILE [THREADS]   ids, one line, spaces between
//   ternion_bpe_tool encode-lines TOKENIZER.json TEXT_FILE       each '\n'-ended line on its own
//   ternion_bpe_tool encode-each TOKENIZER.json JSON_FILE        each string of a JSON list
//   ternion_bpe_tool decode TOKENIZER.json IDS_FILE OUT_FILE     the ids' bytes into OUT_FILE
//   ternion_bpe_tool train TEXT_FILE VOCAB_SIZE OUT.json [SPECIAL...]
//   ternion_bpe_tool train-llama3 TEXT_FILE VOCAB_SIZE OUT.json [SPECIAL...]  (Llama 3's style)
//   ternion_bpe_tool builtin BYTES OUT_FILE                      the built-in corpus's text
// encode and train report their time on stderr.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/builtin_corpus.h"
#include "framework/error.h"
#include "framework/strict_json.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TN_CHECK_AS(UsageError, in.is_open(), "cannot read '", path, "'");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string id_line(const std::vector<std::int32_t>& ids) {
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line + "\n";
}

int usage() {
  std::cerr << "usage: ternion_bpe_tool encode TOKENIZER.json TEXT_FILE [THREADS]\n"
               "       ternion_bpe_tool encode-lines TOKENIZER.json TEXT_FILE\n"
               "       ternion_bpe_tool encode-each TOKENIZER.json JSON_FILE\n"
               "       ternion_bpe_tool decode TOKENIZER.json IDS_FILE OUT_FILE\n"
               "       ternion_bpe_tool train TEXT_FILE VOCAB_SIZE OUT.json [SPECIAL...]\n"
               "       ternion_bpe_tool train-llama3 TEXT_FILE VOCAB_SIZE OUT.json [SPECIAL...]\n"
               "       ternion_bpe_tool builtin BYTES OUT_FILE\n";
  return 2;
}

int run(const std::vector<std::string>& args) {
  if (args.size() >= 3 && args[0] == "encode" && args.size() <= 4) {
    const auto tokenizer = ternion::BpeTokenizer::load(args[1]);
    const std::string text = read_file(args[2]);
    const int threads = args.size() == 4 ? std::atoi(args[3].c_str()) : 1;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<std::int32_t> ids = tokenizer.encode(text, threads);
    const double elapsed = seconds_since(start);
    std::cout << id_line(ids);
    std::cerr << "encoded " << text.size() << " bytes into " << ids.size() << " tokens in "
              << elapsed << " s (" << static_cast<double>(text.size()) / 1e6 / elapsed << " MB/s, "
              << threads << " threads)\n";
    return 0;
  }
  if (args.size() == 3 && args[0] == "encode-lines") {
    const auto tokenizer = ternion::BpeTokenizer::load(args[1]);
    const std::string text = read_file(args[2]);
    std::string out;
    for (std::size_t begin = 0; begin < text.size();) {
      const std::size_t newline = text.find('\n', begin);
      const std::size_t end = newline == std::string::npos ? text.size() : newline + 1;
      out += id_line(tokenizer.encode(std::string_view(text).substr(begin, end - begin)));
      begin = end;
    }
    std::cout << out;
    return 0;
  }
  if (args.size() == 3 && args[0] == "encode-each") {
    const auto tokenizer = ternion::BpeTokenizer::load(args[1]);
    std::string why;
    const std::optional<ternion::Json> texts = ternion::parse_strict_json(read_file(args[2]), &why);
    TN_CHECK_AS(UsageError, texts && texts->is_array(), "'", args[2],
                "' is not a JSON list: ", why);
    std::string out;
    for (const ternion::Json& text : *texts)
      out += id_line(tokenizer.encode(text.get<std::string>()));
    std::cout << out;
    return 0;
  }
  if (args.size() == 4 && args[0] == "decode") {
    const auto tokenizer = ternion::BpeTokenizer::load(args[1]);
    std::istringstream in(read_file(args[2]));
    std::vector<std::int32_t> ids;
    for (std::int64_t id; in >> id;) ids.push_back(static_cast<std::int32_t>(id));
    std::ofstream(args[3], std::ios::binary) << tokenizer.decode(ids);
    return 0;
  }
  if (args.size() >= 4 && (args[0] == "train" || args[0] == "train-llama3")) {
    const std::string text = read_file(args[1]);
    const std::vector<std::string> specials(args.begin() + 4, args.end());
    using Style = ternion::BpeTokenizer::Style;
    const auto start = std::chrono::steady_clock::now();
    const auto tokenizer =
        ternion::BpeTokenizer::train(text, std::atoll(args[2].c_str()), specials,
                                     args[0] == "train" ? Style::gpt2 : Style::llama3);
    const double elapsed = seconds_since(start);
    tokenizer.save(args[3]);
    std::cerr << "trained " << tokenizer.vocab_size() << " tokens on " << text.size()
              << " bytes in " << elapsed << " s\n";
    return 0;
  }
  if (args.size() == 3 && args[0] == "builtin") {
    std::ofstream(args[2], std::ios::binary)
        << ternion::builtin_corpus_text(std::atoll(args[1].c_str()));
    return 0;
  }
  return usage();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "ternion_bpe_tool: error: " << e.what() << "\n";
    return 1;
  }
}
