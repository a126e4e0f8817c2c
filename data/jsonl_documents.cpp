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
}  // namespace

JsonlDocuments join_jsonl_documents(std::string_view jsonl, const std::string& key,
                                    const std::string& separator, const std::string& source) {
  JsonlDocuments out;
  std::int64_t line_number = 0;
  for (std::size_t start = 0; start < jsonl.size();) {
    const std::size_t end = std::min(jsonl.find('\n', start), jsonl.size());
    const std::string line(jsonl.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string why;
    const std::optional<Json> object = parse_strict_json(line, &why);
    TN_CHECK_AS(DataError, object.has_value(), source, " line ", line_number, ": not JSON: ", why);
    TN_CHECK_AS(DataError, object->is_object(), source, " line ", line_number,
                ": is not a JSON object but ", kind_of(*object));
    const auto text = object->find(key);
    TN_CHECK_AS(DataError, text != object->end(), source, " line ", line_number, ": has no '", key,
                "' (the document's text; --json-key names another key)");
    TN_CHECK_AS(DataError, text->is_string(), source, " line ", line_number, ": '", key,
                "' is not a string but ", kind_of(*text));
    out.text += separator;
    out.text += text->get_ref<const std::string&>();
    ++out.documents;
  }
  TN_CHECK_AS(DataError, out.documents > 0, source, " holds no documents");
  return out;
}

}  // namespace ternion
