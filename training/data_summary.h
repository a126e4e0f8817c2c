// The start-up line's account of the data: how much there is, and for data.train how often the
// run reads it (as Megatron's epochs: windows are drawn at random, so a run of many passes over
// a small text sees the same windows again and again).
#pragma once

#include <string>

#include "data/data_blend.h"
#include "data/token_dataset.h"

namespace ternion {

// "2 files, 54186 tokens"
std::string describe_dataset(const TokenDataset& data);

// data.train, of which the run's steps read `tokens_read` tokens: one dataset as
// "1 file, 54186 tokens (0.0047 passes in this run)"; a blend as "blend of 2 datasets:
// weight 0.7 'web/*.bin' (3 files, 90000 tokens, 0.002 passes in this run), weight 0.3 ...",
// each dataset's passes those its weight's share of the tokens makes.
std::string describe_train_data(const DataBlend& data, double tokens_read);

}  // namespace ternion
