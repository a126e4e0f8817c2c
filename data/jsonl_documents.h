// Documents in JSON Lines, as Megatron-LM's preprocessing and Hugging Face datasets write
// them: one JSON object a line, each document's text under one key ("text" by default).
//
// read_jsonl_documents: blank lines (a trailing newline among them) are skipped. A line that
// is not a JSON object, or whose `key` is missing or not a string, is a DataError naming
// `source`, the line and the reason; so is a file without documents.
//
// encode_documents: each document's tokens between the tokenizer's document markers
// (Tokenizer::document_markers), in file order. A marker's text inside a document is encoded
// as text, as llm.c's and Megatron-LM's data scripts encode it: only the markers placed here
// separate documents. Encoding runs on `threads`, the result the same for any count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace ternion {

std::vector<std::string> read_jsonl_documents(std::string_view jsonl, const std::string& key,
                                              const std::string& source);

// DataError where the tokenizer has no document markers (bytes have none) or a document is
// not UTF-8.
// The documents are released as they are joined for encoding.
std::vector<std::int32_t> encode_documents(const Tokenizer& tokenizer,
                                           std::vector<std::string> documents, int threads);

}  // namespace ternion
