#include "data/jsonl_documents.h"

#include <algorithm>
#include <exception>
#include <thread>

#include "framework/error.h"
#include "framework/strict_json.h"

namespace ternion {

namespace {

// What a value is, without its text (a line may hold a whole book).
const char* kind_of(const Json& value) {
  if (value.is_object()) return "an object";
  if (value.is_array()) return "a list";
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "true or false";
  if (value.is_number()) return "a number";
  return "null";
}

// The parser's reason without the text it last read (a whole document, for a line cut short)
// or its own line number (always 1: it reads one line).
std::string parse_reason(std::string why) {
  if (const std::size_t cut = why.find("; last read:"); cut != std::string::npos) why.resize(cut);
  constexpr std::string_view kOwnLine = "parse error at line 1, ";
  if (why.rfind(kOwnLine, 0) == 0) why.erase(0, kOwnLine.size());
  return why;
}

}  // namespace

std::vector<std::string> read_jsonl_documents(std::string_view jsonl, const std::string& key,
                                              const std::string& source) {
  std::vector<std::string> documents;
  std::int64_t line_number = 0;
  for (std::size_t start = 0; start < jsonl.size();) {
    const std::size_t end = std::min(jsonl.find('\n', start), jsonl.size());
    const std::string line(jsonl.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string why;
    std::optional<Json> object = parse_strict_json(line, &why);
    TN_CHECK_AS(DataError, object.has_value(), source, " line ", line_number,
                ": not JSON: ", parse_reason(why));
    TN_CHECK_AS(DataError, object->is_object(), source, " line ", line_number,
                ": is not a JSON object but ", kind_of(*object));
    const auto text = object->find(key);
    TN_CHECK_AS(DataError, text != object->end(), source, " line ", line_number, ": has no '", key,
                "' (the document's text; --json-key names another key)");
    TN_CHECK_AS(DataError, text->is_string(), source, " line ", line_number, ": '", key,
                "' is not a string but ", kind_of(*text));
    documents.push_back(std::move(text->get_ref<std::string&>()));
  }
  TN_CHECK_AS(DataError, !documents.empty(), source, " holds no documents");
  return documents;
}

std::vector<std::int32_t> encode_documents(const Tokenizer& tokenizer,
                                           const std::vector<std::string>& documents, int threads) {
  const Tokenizer::DocumentMarkers markers = tokenizer.document_markers();
  TN_CHECK_AS(DataError, !markers.before.empty(), tokenizer.describe(),
              " has no end-of-text token to separate documents with");
  const std::int32_t before = tokenizer.bpe()->added_token_id(markers.before);
  const std::int32_t after =
      markers.after.empty() ? -1 : tokenizer.bpe()->added_token_id(markers.after);
  // Contiguous runs of documents, one a thread, joined in order.
  const std::size_t parts =
      std::clamp<std::size_t>(threads, 1, std::max<std::size_t>(1, documents.size()));
  std::vector<std::vector<std::int32_t>> tokens(parts);
  std::vector<std::exception_ptr> errors(parts);
  const auto encode_part = [&](std::size_t p) {
    try {
      for (std::size_t d = documents.size() * p / parts; d < documents.size() * (p + 1) / parts;
           ++d) {
        tokens[p].push_back(before);
        const std::vector<std::int32_t> ids =
            tokenizer.encode(documents[d], 1, BpeTokenizer::AddedTokens::as_text);
        tokens[p].insert(tokens[p].end(), ids.begin(), ids.end());
        if (after >= 0) tokens[p].push_back(after);
      }
    } catch (...) {
      errors[p] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> workers;
    for (std::size_t p = 1; p < parts; ++p) workers.emplace_back(encode_part, p);
    encode_part(0);
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  std::vector<std::int32_t> all;
  for (const std::vector<std::int32_t>& part : tokens)
    all.insert(all.end(), part.begin(), part.end());
  return all;
}

}  // namespace ternion
