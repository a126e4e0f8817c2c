// JSON as Ternion's files may hold it: RFC 8259 through nlohmann/json (UTF-8 checked, nothing
// after the document), minus what JSON allows but no file of ours should: a key twice in one
// object (readers would disagree on which one counts) and nesting deeper than 64 levels.
//
// Parsed documents are Json (objects keyed in sorted maps: a header of many thousand keys
// parses in n log n, where an insertion-ordered object is quadratic). Files a person reads
// are written from OrderedJson, so their keys keep the order they were given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ternion {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

inline constexpr int kMaxJsonDepth = 64;

// The document, or nothing with `*why` saying what is wrong ("...at byte 17..."). With
// `top_level_keys`, the keys of a top-level object in file order (Json sorts them).
std::optional<Json> parse_strict_json(const std::string& text, std::string* why,
                                      std::vector<std::string>* top_level_keys = nullptr);

// `value` as text; a string that is not UTF-8 (a name from anywhere) has its bad bytes
// replaced by U+FFFD rather than failing the write.
std::string json_text(const OrderedJson& value, int indent = -1);
std::string json_text(const Json& value, int indent = -1);

// The value as an int64 where it is an integer that fits (no fraction, no exponent); else none.
std::optional<std::int64_t> json_int64(const Json& value);

// What a value is, for messages: "an object", "a list", "null", or the value as written.
std::string describe_json(const Json& value);

}  // namespace ternion
