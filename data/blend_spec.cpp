#include "data/blend_spec.h"

#include <glob.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "framework/error.h"

namespace ternion {

namespace {

std::vector<std::string> items_of(const std::string& spec) {
  std::istringstream in(spec);
  std::vector<std::string> items;
  for (std::string item; in >> item;) items.push_back(item);
  return items;
}

// A decimal or exponent number as strtod reads it, the whole text; `out_of_range` for one past
// double's range (1e999), which is no finite weight.
bool parse_number(const std::string& text, double& value, bool& out_of_range) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') ++first;  // from_chars takes '-' only
  const auto [end, error] = std::from_chars(first, last, value);
  out_of_range = error == std::errc::result_out_of_range;
  return (error == std::errc() || out_of_range) && end == last && first != last;
}

bool is_number(const std::string& text) {
  double value = 0;
  bool out_of_range = false;
  return parse_number(text, value, out_of_range);
}

// Whether `spec` as a whole is a path TokenDataset::open reads: paths with spaces stay paths.
bool names_a_path(const std::string& spec) {
  std::error_code error;
  if (std::filesystem::exists(spec, error)) return true;
  if (spec.find_first_of("*?[") == std::string::npos) return false;
  glob_t matches{};
  const bool matched = ::glob(spec.c_str(), 0, nullptr, &matches) == 0 && matches.gl_pathc > 0;
  ::globfree(&matches);
  return matched;
}

}  // namespace

std::vector<double> blend_upper_bounds(const std::vector<double>& weights) {
  std::vector<double> bounds;
  double upper = 0;
  for (double weight : weights) bounds.push_back(upper += weight);
  if (!bounds.empty()) bounds.back() = 1.0;  // every u < 1 lands: no rounding gap past the last
  return bounds;
}

bool looks_like_a_blend(const std::string& spec) {
  const std::vector<std::string> items = items_of(spec);
  return items.size() >= 2 && !names_a_path(spec) && is_number(items[0]);
}

BlendSpec parse_blend_spec(const std::string& key, const std::string& spec) {
  const std::vector<std::string> items = items_of(spec);
  if (items.size() < 2 || names_a_path(spec)) return {{{1.0, spec}}, false};
  const std::string quoted = key + " '" + spec + "'";
  TN_CHECK_AS(DataError, is_number(items[0]), quoted,
              " names no file, directory or glob match, and no blend of WEIGHT PATH pairs: '",
              items[0], "' is not a weight");
  TN_CHECK_AS(DataError, items.size() % 2 == 0, quoted, ": a blend is WEIGHT PATH pairs, but its ",
              items.size(), " items are an odd number");
  BlendSpec blend{{}, true};
  for (std::size_t i = 0; i < items.size(); i += 2) {
    double weight = 0;
    bool out_of_range = false;
    TN_CHECK_AS(DataError, parse_number(items[i], weight, out_of_range), quoted, ": '", items[i],
                "' (item ", i + 1, ") is not a number: a blend is WEIGHT PATH pairs");
    TN_CHECK_AS(DataError, !out_of_range && std::isfinite(weight) && weight > 0, quoted,
                ": the weight ", items[i], " of '", items[i + 1],
                "' must be a positive finite number");
    blend.parts.push_back({weight, items[i + 1]});
  }
  // Scaled by the largest first, so that weights near double's limit cannot sum to infinity.
  double largest = 0, sum = 0;
  for (const BlendPart& part : blend.parts) largest = std::max(largest, part.weight);
  for (BlendPart& part : blend.parts) sum += part.weight /= largest;
  std::vector<double> weights;
  for (BlendPart& part : blend.parts) weights.push_back(part.weight /= sum);
  const std::vector<double> bounds = blend_upper_bounds(weights);
  for (std::size_t i = 0; i < bounds.size(); ++i)
    TN_CHECK_AS(DataError, bounds[i] > (i == 0 ? 0.0 : bounds[i - 1]), quoted, ": the weight of '",
                blend.parts[i].path, "' is ", blend.parts[i].weight,
                " of the total, too small a share for any draw to pick");
  return blend;
}

}  // namespace ternion
