// Comparing a sharded run with the one-rank reference: shards against slices, to fp32
// rounding. Shared by the tensor- and pipeline-parallel tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "framework/parameter.h"
#include "test_util.h"

namespace ternion::test {

// Equal to fp32 rounding: sharded sums add in another order, so each element may differ by
// `rel` of the tensor's largest magnitude (an elementwise relative bound would fail on the
// elements that cancel to near zero).
inline ::testing::AssertionResult close_to(const std::string& label,
                                          const std::vector<float>& got,
                                          const std::vector<float>& want, double rel) {
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  return ::ternion::test::close_to(label, got, want, rel * scale, rel);
}

// The part of a whole tensor that a shard of it holds.
inline Tensor slice_for(const Tensor& whole, const Parameter& shard) {
  if (!shard.is_sharded()) return whole;
  return whole.slice(shard.shard_dim, shard.shard_offset, shard.value.size(shard.shard_dim));
}

// Every parameter's value and gradient against the reference's slice, by name. A pipeline
// stage holds some of the reference's parameters (`all` false), a tensor-parallel rank all.
inline void expect_parameters_match(const std::vector<Parameter*>& sharded,
                                    const std::vector<Parameter*>& reference, double rtol,
                                    bool all = true) {
  std::map<std::string, const Parameter*> by_name;
  for (const Parameter* p : reference) by_name[p->name] = p;
  if (all) {
    ASSERT_EQ(sharded.size(), reference.size());
  }
  for (const Parameter* p : sharded) {
    ASSERT_TRUE(by_name.count(p->name)) << p->name;
    const Parameter& ref = *by_name[p->name];
    EXPECT_EQ(p->global_shape, ref.value.shape()) << p->name;
    EXPECT_TRUE(close_to(p->name + " value", p->value.to_vector(),
                         slice_for(ref.value, *p).to_vector(), rtol));
    EXPECT_TRUE(close_to(p->name + " grad", p->grad.to_vector(),
                         slice_for(ref.grad, *p).to_vector(), rtol));
  }
}

}  // namespace ternion::test
