#include "framework/strict_json.h"

#include <limits>
#include <set>
#include <vector>

namespace ternion {

namespace {
// Thrown by the parser's callback; caught below.
struct Refused {
  std::string why;
};
}  // namespace

std::optional<Json> parse_strict_json(const std::string& text, std::string* why,
                                      std::vector<std::string>* top_level_keys) {
  std::vector<std::set<std::string>> keys;  // of each object being read
  const Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > kMaxJsonDepth)
      throw Refused{"nested deeper than " + std::to_string(kMaxJsonDepth) + " levels"};
    if (event == Json::parse_event_t::object_start) keys.emplace_back();
    if (event == Json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == Json::parse_event_t::key) {
      if (!keys.back().insert(parsed.get<std::string>()).second)
        throw Refused{"key '" + parsed.get<std::string>() + "' appears twice"};
      if (top_level_keys != nullptr && keys.size() == 1)
        top_level_keys->push_back(parsed.get<std::string>());
    }
    return true;
  };
  try {
    return Json::parse(text, check);
  } catch (const Refused& refused) {
    *why = refused.why;
  } catch (const Json::exception& e) {
    // A syntax error names its line, column and byte; a number past a double's range, its
    // text. The library's "[json.exception.parse_error.101] " before it says nothing more.
    *why = e.what();
    if (why->rfind("[json.exception.", 0) == 0 && why->find("] ") != std::string::npos)
      why->erase(0, why->find("] ") + 2);
  }
  return std::nullopt;
}

std::string json_text(const OrderedJson& value, int indent) {
  return value.dump(indent, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string json_text(const Json& value, int indent) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

std::optional<std::int64_t> json_int64(const Json& value) {
  if (!value.is_number_integer()) return std::nullopt;
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > kMax) return std::nullopt;
  return value.get<std::int64_t>();
}

std::string describe_json(const Json& value) {
  if (value.is_object()) return "an object";
  if (value.is_array()) return "a list";
  if (value.is_null()) return "null";
  return value.is_string() ? "'" + value.get<std::string>() + "'" : "'" + value.dump() + "'";
}

}  // namespace ternion
