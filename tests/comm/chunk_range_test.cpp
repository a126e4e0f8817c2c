// chunk_range: how reduce_scatter (and ZeRO sharding) cut n elements into `parts` chunks.
// Pure arithmetic, no MPI.
#include <gtest/gtest.h>

#include <cstdint>

#include "parallel/comm/communicator.h"

namespace ternion {
namespace {

TEST(ChunkRange, EvenSplitGivesEqualChunks) {
  for (std::int64_t i = 0; i < 4; ++i) {
    const ChunkRange c = chunk_range(12, 4, i);
    EXPECT_EQ(c.begin, 3 * i);
    EXPECT_EQ(c.end, 3 * i + 3);
  }
}

TEST(ChunkRange, FirstRemainderChunksAreOneLarger) {
  // 10 over 4: sizes 3, 3, 2, 2.
  const std::int64_t begins[] = {0, 3, 6, 8}, ends[] = {3, 6, 8, 10};
  for (std::int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(chunk_range(10, 4, i).begin, begins[i]) << "chunk " << i;
    EXPECT_EQ(chunk_range(10, 4, i).end, ends[i]) << "chunk " << i;
  }
}

TEST(ChunkRange, MorePartsThanElementsGivesEmptyTrailingChunks) {
  // 2 over 5: sizes 1, 1, 0, 0, 0, the empty ones at the end.
  const std::int64_t sizes[] = {1, 1, 0, 0, 0};
  for (std::int64_t i = 0; i < 5; ++i) {
    const ChunkRange c = chunk_range(2, 5, i);
    EXPECT_EQ(c.size(), sizes[i]) << "chunk " << i;
    EXPECT_EQ(c.begin, i < 2 ? i : 2) << "chunk " << i;
  }
  EXPECT_EQ(chunk_range(0, 3, 2).size(), 0);
  EXPECT_EQ(chunk_range(0, 3, 2).begin, 0);
}

// Every split of n in 0..40 over 1..9 parts tiles [0, n) in order, with sizes that differ by
// at most one, the larger ones first and exactly n % parts of them.
TEST(ChunkRange, ChunksTileTheRangeLargestFirst) {
  for (std::int64_t n = 0; n <= 40; ++n) {
    for (std::int64_t parts = 1; parts <= 9; ++parts) {
      std::int64_t expected_begin = 0, larger = 0;
      for (std::int64_t i = 0; i < parts; ++i) {
        const ChunkRange c = chunk_range(n, parts, i);
        ASSERT_EQ(c.begin, expected_begin) << n << " over " << parts << ", chunk " << i;
        ASSERT_TRUE(c.size() == n / parts || c.size() == n / parts + 1)
            << n << " over " << parts << ", chunk " << i << " has " << c.size();
        if (c.size() == n / parts + 1) {
          ASSERT_EQ(larger, i) << n << " over " << parts << ": a larger chunk after a smaller one";
          ++larger;
        }
        expected_begin = c.end;
      }
      EXPECT_EQ(expected_begin, n) << n << " over " << parts;
      EXPECT_EQ(larger, n % parts) << n << " over " << parts;
    }
  }
}

TEST(ChunkRange, RejectsAnIndexOutsideTheParts) {
  EXPECT_THROW(chunk_range(10, 4, 4), InternalError);
  EXPECT_THROW(chunk_range(10, 0, 0), InternalError);
  EXPECT_THROW(chunk_range(-1, 2, 0), InternalError);
}

}  // namespace
}  // namespace ternion
