// DataBlend: the datasets data.train names, each with its weight (data/blend_spec.h). A plain
// path is a blend of one dataset of weight 1; the sampler (data/batch_sampler.h) draws each
// sequence's dataset by weight, then its window within that dataset.
//
// `open` opens every component's shards at once (TokenDataset::open's refusals, each naming
// the component's path) and refuses a file that two components share (the same file under any
// name): its weight would count twice.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/token_dataset.h"

namespace ternion {

struct BlendComponent {
  double weight;     // normalised: a blend's weights sum to 1
  std::string path;  // the file, directory or glob the spec names
  TokenDataset data;
};

class DataBlend {
 public:
  static DataBlend open(const std::string& key, const std::string& spec);
  // At least one component, weights positive and summing to 1.
  explicit DataBlend(std::vector<BlendComponent> components);

  std::span<const BlendComponent> components() const { return components_; }
  std::int64_t token_count() const;        // over all components
  std::vector<std::string> paths() const;  // every component's files, in order
  std::uint32_t max_token() const;

 private:
  std::vector<BlendComponent> components_;
};

// A split that is read in order (data.val): one file, directory or glob (TokenDataset::open);
// weights are refused (DataError naming `key`), as an evaluation reads every window alike.
TokenDataset open_unweighted(const std::string& key, const std::string& spec);

// refuse_shared_shards (data/token_dataset.h) against every component of `train`.
void refuse_shared_shards(const DataBlend& train, const TokenDataset& val);

}  // namespace ternion
