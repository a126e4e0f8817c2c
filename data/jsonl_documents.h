// Documents in JSON Lines, as Megatron-LM's preprocessing and Hugging Face datasets write
// them: one JSON object a line, each document's text under one key ("text" by default).
//
// The documents become one text, each preceded by `separator` (the tokenizer's end-of-text
// token, as llm.c's data scripts put it before every document), so that a tokenizer matching
// its added tokens first encodes each document on its own, with the separator's id between.
//
// Blank lines (a trailing newline among them) are skipped. A line that is not a JSON object,
// or whose `key` is missing or not a string, is a DataError naming `source`, the line and the
// reason. No documents at all is a DataError too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ternion {

struct JsonlDocuments {
  std::string text;  // separator + document, for each document in file order
  std::int64_t documents = 0;
};

JsonlDocuments join_jsonl_documents(std::string_view jsonl, const std::string& key,
                                    const std::string& separator, const std::string& source);

}  // namespace ternion
