// BlendSpec: data.train's "WEIGHT PATH ..." read into normalised parts, plain paths (spaces in
// them too) read as one part, and every malformed blend refused with one line naming the key.
#include "data/blend_spec.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "data_test_support.h"

namespace ternion {
namespace {

using test::TempDir;

void expect_parts(const std::string& spec, const std::vector<BlendPart>& want, bool weighted) {
  const BlendSpec got = parse_blend_spec("data.train", spec);
  EXPECT_EQ(got.weighted, weighted) << spec;
  ASSERT_EQ(got.parts.size(), want.size()) << spec;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.parts[i].path, want[i].path) << spec << " part " << i;
    EXPECT_NEAR(got.parts[i].weight, want[i].weight, 1e-15) << spec << " part " << i;
  }
}

TEST(BlendSpec, PlainPathsAreOneUnweightedPart) {
  expect_parts("runs/train.bin", {{1.0, "runs/train.bin"}}, false);
  expect_parts("runs/train_*.bin", {{1.0, "runs/train_*.bin"}}, false);
  // A path with a space, existing or matched by a glob, is still one path.
  TempDir dir;
  std::filesystem::create_directory(dir.file("my data"));
  test::write_raw_file(dir.file("my data/train.bin"), "x");
  expect_parts(dir.file("my data/train.bin"), {{1.0, dir.file("my data/train.bin")}}, false);
  expect_parts(dir.file("my data"), {{1.0, dir.file("my data")}}, false);
  expect_parts(dir.file("my data/tr*.bin"), {{1.0, dir.file("my data/tr*.bin")}}, false);
}

TEST(BlendSpec, WeightsAreNormalisedToSumOne) {
  expect_parts("0.7 web.bin 0.3 books/*.bin", {{0.7, "web.bin"}, {0.3, "books/*.bin"}}, true);
  expect_parts("7 web.bin 3 books", {{0.7, "web.bin"}, {0.3, "books"}}, true);
  // Any whitespace separates, as a YAML block or folded string gives it; '+' and exponents.
  expect_parts("\t2 a.bin\n 2 b.bin   +1e0 c.bin\n",
               {{0.4, "a.bin"}, {0.4, "b.bin"}, {0.2, "c.bin"}}, true);
  // Weights near double's limit do not sum to infinity.
  expect_parts("1e308 a.bin 1e308 b.bin", {{0.5, "a.bin"}, {0.5, "b.bin"}}, true);
  // One weighted path: a blend of one, its weight exactly 1 whatever was written.
  const BlendSpec one = parse_blend_spec("data.train", "2.5 a.bin");
  ASSERT_EQ(one.parts.size(), 1u);
  EXPECT_EQ(one.parts[0].weight, 1.0);
  EXPECT_TRUE(one.weighted);
}

TEST(BlendSpec, MalformedBlendsAreRefused) {
  auto refused = [](const std::string& spec, const std::vector<std::string>& parts) {
    std::vector<std::string> all{"data.train '" + spec + "'"};
    all.insert(all.end(), parts.begin(), parts.end());
    test::expect_error<DataError>(
        spec, [&] { parse_blend_spec("data.train", spec); }, all);
  };
  refused("0.7 web.bin 0.3", {"a blend is WEIGHT PATH pairs", "3 items are an odd number"});
  refused("web.bin 0.7 books.bin 0.3",
          {"names no file, directory or glob match, and no blend", "'web.bin' is not a weight"});
  refused("0.7 web.bin books.bin 0.3", {"'books.bin' (item 3) is not a number"});
  refused("0.7 web.bin 0x1 books.bin", {"'0x1' (item 3) is not a number"});
  refused("0 web.bin 1 books.bin", {"the weight 0 of 'web.bin' must be a positive finite number"});
  refused("1 web.bin -0.5 books.bin", {"the weight -0.5 of 'books.bin' must be a positive finite"});
  refused("inf web.bin 1 books.bin", {"the weight inf of 'web.bin' must be a positive finite"});
  refused("1 web.bin nan books.bin", {"the weight nan of 'books.bin' must be a positive finite"});
  refused("1e999 web.bin 1 books.bin", {"the weight 1e999 of 'web.bin' must be a positive"});
  refused("-0 web.bin", {"the weight -0 of 'web.bin' must be a positive finite number"});
  // A share the sampler's 53-bit uniform cannot resolve would never be drawn (or is 0 outright).
  refused("1 web.bin 1e-17 books.bin",
          {"the weight of 'books.bin' is 1e-17 of the total, too small a share for any draw"});
  refused("1e300 web.bin 1e-300 books.bin", {"the weight of 'books.bin' is 0 of the total"});
  // Above 2^-53, yet the shares before it already round to 1.
  refused("2 a.bin 3 b.bin 8e-16 c.bin", {"the weight of 'c.bin' is 1.6e-16 of the total"});
  expect_parts("1 web.bin 1e-14 books.bin", {{1.0 - 1e-14, "web.bin"}, {1e-14, "books.bin"}}, true);
}

}  // namespace
}  // namespace ternion
