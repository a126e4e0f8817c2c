#include "training/data_summary.h"

#include <cstdio>

#include "framework/logging.h"

namespace ternion {

namespace {

std::string passes(double tokens_read, std::int64_t tokens) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3g passes in this run",
                tokens_read / static_cast<double>(tokens));
  return text;
}

}  // namespace

std::string describe_dataset(const TokenDataset& data) {
  return detail::concat(count_of(static_cast<std::int64_t>(data.shards().size()), "file", "files"),
                        ", ", data.token_count(), " tokens");
}

std::string describe_train_data(const DataBlend& data, double tokens_read) {
  const auto components = data.components();
  if (components.size() == 1) {
    const TokenDataset& only = components.front().data;
    return describe_dataset(only) + " (" + passes(tokens_read, only.token_count()) + ")";
  }
  std::string text = detail::concat("blend of ", components.size(), " datasets:");
  for (const BlendComponent& c : components) {
    char weight[32];
    std::snprintf(weight, sizeof weight, "%.3g", c.weight);
    text += detail::concat(&c == &components.front() ? " " : ", ", "weight ", weight, " '", c.path,
                           "' (", describe_dataset(c.data), ", ",
                           passes(tokens_read * c.weight, c.data.token_count()), ")");
  }
  return text;
}

}  // namespace ternion
