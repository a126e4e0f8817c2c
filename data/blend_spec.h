// BlendSpec: what data.train names, read. Besides one dataset in a form TokenDataset::open
// takes (a file, a directory, a glob), a blend of several, each with a weight: whitespace-
// separated pairs `WEIGHT PATH WEIGHT PATH ...`, as Megatron-LM's `--data-path 0.7 web 0.3
// books`. The weights are positive finite numbers, normalised to sum 1.
//
// A spec is one path when it is one item, or when as a whole it names an existing file or
// directory or a glob that matches (so a path with a space in it reads as it always did).
// Otherwise it must be a blend; refused with one DataError line naming `key`: an odd number of
// items, a weight that is not a number, or not positive and finite, and a share too small for
// any draw to pick (its interval of blend_upper_bounds empty once rounded).
#pragma once

#include <string>
#include <vector>

namespace ternion {

struct BlendPart {
  double weight;     // normalised: the parts' weights sum to 1
  std::string path;  // a file, a directory or a glob (data/token_dataset.h)
};

struct BlendSpec {
  std::vector<BlendPart> parts;  // at least one
  bool weighted = false;         // the spec gave weights; false: one path, of weight 1
};

BlendSpec parse_blend_spec(const std::string& key, const std::string& spec);

// The cumulative bounds the sampler draws against: part i takes the uniforms u in [0, 1) with
// bound[i - 1] <= u < bound[i]; the sums rounded as they fall, the last bound 1 exactly.
std::vector<double> blend_upper_bounds(const std::vector<double>& weights);

// Whether `spec` is written as a blend (not one path, and a number first), well formed or not.
bool looks_like_a_blend(const std::string& spec);

}  // namespace ternion
