#include "parallel/gradient_reducer.h"

#include <gtest/gtest.h>

namespace ternion {
namespace {

TEST(GradientBuckets, ClosedOnceFullNeverSplittingAParameter) {
  const auto buckets = plan_gradient_buckets({4, 4, 4, 10, 1, 1}, 8);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].params, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(buckets[0].offset, 0);
  EXPECT_EQ(buckets[0].numel, 8);
  EXPECT_EQ(buckets[1].params, (std::vector<std::size_t>{2, 3}));  // a large one closes it
  EXPECT_EQ(buckets[1].offset, 8);
  EXPECT_EQ(buckets[1].numel, 14);
  EXPECT_EQ(buckets[2].params, (std::vector<std::size_t>{4, 5}));  // the remainder
  EXPECT_EQ(buckets[2].numel, 2);
}

TEST(GradientBuckets, EveryParameterInExactlyOneBucketInOrder) {
  std::vector<std::int64_t> numels;
  for (int i = 0; i < 50; ++i) numels.push_back(1 + (i * 37) % 23);
  for (std::int64_t size : {1, 7, 40, 1000}) {
    std::size_t next = 0;
    std::int64_t offset = 0;
    for (const GradientBucket& b : plan_gradient_buckets(numels, size)) {
      EXPECT_EQ(b.offset, offset);
      std::int64_t n = 0;
      for (std::size_t i : b.params) {
        EXPECT_EQ(i, next++);
        n += numels[i];
      }
      EXPECT_EQ(b.numel, n);
      offset += n;
    }
    EXPECT_EQ(next, numels.size()) << "bucket size " << size;
  }
  EXPECT_THROW(plan_gradient_buckets({1}, 0), InternalError);
}

}  // namespace
}  // namespace ternion
