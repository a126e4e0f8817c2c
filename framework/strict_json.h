// JSON as Ternion's files may hold it: RFC 8259 through nlohmann/json (UTF-8 checked, nothing
// after the document), minus what JSON allows but no file of ours should: a key twice in one
// object (readers would disagree on which one counts) and nesting deeper than 64 levels.
// Objects keep their members in file order (ordered_json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ternion {

using Json = nlohmann::ordered_json;

inline constexpr int kMaxJsonDepth = 64;

// The document, or nothing with `*why` saying what is wrong ("...at byte 17...").
std::optional<Json> parse_strict_json(const std::string& text, std::string* why);

// The value as an int64 where it is an integer that fits (no fraction, no exponent); else none.
std::optional<std::int64_t> json_int64(const Json& value);

// What a value is, for messages: "an object", "a list", "null", or the value as written.
std::string describe_json(const Json& value);

}  // namespace ternion
