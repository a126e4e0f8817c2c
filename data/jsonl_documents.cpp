#include "data/jsonl_documents.h"

#include <algorithm>

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
                                           std::vector<std::string> documents, int threads) {
  const Tokenizer::DocumentMarkers markers = tokenizer.document_markers();
  TN_CHECK_AS(DataError, !markers.before.empty(), tokenizer.describe(),
              " has no end-of-text token to separate documents with");
  // One text, the markers placed by id: encoded as each document alone, in one pass.
  std::string text;
  std::vector<BpeTokenizer::PlacedToken> placed;
  auto place = [&](const std::string& marker) {
    if (marker.empty()) return;
    placed.push_back(
        {text.size(), text.size() + marker.size(), tokenizer.bpe()->added_token_id(marker)});
    text += marker;
  };
  for (std::string& document : documents) {
    place(markers.before);
    text += document;
    std::string().swap(document);
    place(markers.after);
  }
  return tokenizer.bpe()->encode_placed(text, placed, threads);
}

}  // namespace ternion
