// Dropout: the kept fraction, the exact scale, backward reusing the forward's mask, p = 0 as an
// exact copy, masks independent of how the global batch is cut (samples and sequence),
// finite differences, the f32 op against the f64 template, the AVX2 Philox against philox_bits.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/philox_avx2.h"
#include "kernels/dropout.h"
#include "kernels/dropout_math.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

const RngStream kStream = dropout_stream(1234, 7, "block3.attn.dropout");

TEST(Dropout, KeptFractionAndExactScale) {
  constexpr int kB = 4, kT = 256, kC = 300;
  constexpr float kP = 0.1f;
  const auto xs = test::random_floats(kB * kT * kC, 1, 0.5f, 1.5f);  // never 0
  Tensor x = Tensor::from_vector(xs, {kB, kT, kC}), out = Tensor::empty({kB, kT, kC});
  dropout_forward(out, x, kP, kStream, {0, 0, kT});
  const auto o = out.to_vector();
  // p = 0.1 is dropped at 6554 / 65536 (its nearest multiple of 2^-16); kept elements are
  // scaled by the inverse of 1 - that.
  EXPECT_EQ(dropout_threshold(kP), 6554u);
  const float scale = 65536.0f / (65536.0f - 6554.0f);
  std::size_t kept = 0, wrong = 0;
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (o[i] != 0.0f) {
      ++kept;
      wrong += o[i] != xs[i] * scale;
    }
  }
  EXPECT_EQ(wrong, 0u) << "kept elements not exactly x * 65536 / (65536 - 6554)";
  const double fraction = static_cast<double>(kept) / static_cast<double>(o.size());
  const double sigma = std::sqrt(kP * (1 - kP) / static_cast<double>(o.size()));
  EXPECT_NEAR(fraction, 1 - kP, 5 * sigma) << "kept fraction over " << o.size() << " elements";
}

TEST(Dropout, BackwardUsesTheForwardMask) {
  constexpr int kB = 3, kT = 7, kC = 10;
  constexpr float kP = 0.4f;
  const auto xs = test::random_floats(kB * kT * kC, 2, 0.5f, 1.5f);
  const auto douts = test::random_floats(kB * kT * kC, 3, 0.5f, 1.5f);
  const GlobalPosition position{5, 3, 16};
  Tensor x = Tensor::from_vector(xs, {kB, kT, kC}), out = Tensor::empty({kB, kT, kC});
  dropout_forward(out, x, kP, kStream, position);
  Tensor dout = Tensor::from_vector(douts, {kB, kT, kC}), dx = Tensor::full({kB, kT, kC}, NAN);
  dropout_backward(dx, dout, kP, kStream, position);
  const auto o = out.to_vector(), d = dx.to_vector();
  std::vector<float> want(d.size());
  for (std::size_t i = 0; i < d.size(); ++i)
    want[i] = o[i] != 0.0f ? douts[i] * dropout_scale<float>(dropout_threshold(kP)) : 0.0f;
  test::expect_bitwise_equal("dropout dx = mask * dout * scale", d, want);
  // ...and a different step draws a different mask.
  Tensor other = Tensor::empty({kB, kT, kC});
  dropout_forward(other, x, kP, dropout_stream(1234, 8, "block3.attn.dropout"), position);
  EXPECT_NE(other.to_vector(), o);
}

TEST(Dropout, ZeroProbabilityIsAnExactCopy) {
  const auto xs = test::random_floats(2 * 5 * 3, 4);
  Tensor x = Tensor::from_vector(xs, {2, 5, 3}), out = Tensor::full({2, 5, 3}, NAN);
  dropout_forward(out, x, 0.0f, kStream, {0, 0, 5});
  test::expect_bitwise_equal("dropout p = 0 forward", out.to_vector(), xs);
  dropout_backward(x, x, 0.0f, kStream, {0, 0, 5});  // in place
  test::expect_bitwise_equal("dropout p = 0 backward in place", x.to_vector(), xs);
}

TEST(Dropout, MaskDoesNotDependOnTheLayout) {
  // One global [4, 12, 5] tensor against its pieces: samples [0, 3) and [3, 4), and within
  // those, sequence positions [0, 5) and [5, 12), as data and sequence parallelism cut it.
  constexpr int kB = 4, kT = 12, kC = 5;
  constexpr float kP = 0.5f;
  Tensor ones = Tensor::full({kB, kT, kC}, 1.0f), whole = Tensor::empty({kB, kT, kC});
  dropout_forward(whole, ones, kP, kStream, {0, 0, kT});
  for (auto [b0, nb] : {std::pair{0, 3}, std::pair{3, 1}}) {
    for (auto [t0, nt] : {std::pair{0, 5}, std::pair{5, 7}}) {
      Tensor piece_in = Tensor::full({nb, nt, kC}, 1.0f), piece = Tensor::empty({nb, nt, kC});
      dropout_forward(piece, piece_in, kP, kStream, {b0, t0, kT});
      test::expect_bitwise_equal(
          "dropout piece samples [" + std::to_string(b0) + ", +" + std::to_string(nb) +
              ") positions [" + std::to_string(t0) + ", +" + std::to_string(nt) + ")",
          piece.to_vector(), whole.slice(0, b0, nb).slice(1, t0, nt).to_vector());
    }
  }
}

// The mask is the documented function of the global index: element i kept when the 16-bit
// half (i % 128) / 16 of philox_bits(stream, 16 (i / 128) + i % 16) (low half of word w first)
// is at least p * 65536, rounded. Rows of 300 channels from an offset sample and position
// start at many offsets within a block of 128, so the kernel's scalar head, its blocks and its
// tail are all compared.
TEST(Dropout, MaskIsTheDocumentedFunctionOfTheGlobalIndex) {
  constexpr int kB = 3, kT = 5, kC = 300, kSampleOffset = 2, kSeqOffset = 3, kSeqTotal = 11;
  constexpr float kP = 0.3f;
  Tensor ones = Tensor::full({kB, kT, kC}, 1.0f), out = Tensor::empty({kB, kT, kC});
  dropout_forward(out, ones, kP, kStream, {kSampleOffset, kSeqOffset, kSeqTotal});
  const std::vector<float> o = out.to_vector();
  std::size_t wrong = 0;
  for (int b = 0; b < kB; ++b)
    for (int t = 0; t < kT; ++t)
      for (int c = 0; c < kC; ++c) {
        const auto i = static_cast<std::uint64_t>(
            ((kSampleOffset + b) * kSeqTotal + kSeqOffset + t) * kC + c);
        const Philox4 r = philox_bits(kStream, i / 128 * 16 + i % 16);
        const std::uint32_t half = i % 128 / 16;
        const std::uint32_t bits = (r.v[half / 2] >> (half % 2 == 0 ? 0 : 16)) & 0xFFFFu;
        const bool keep = bits >= static_cast<std::uint32_t>(std::lround(kP * 65536));
        if ((o[static_cast<std::size_t>((b * kT + t) * kC + c)] != 0.0f) != keep && wrong++ < 5)
          ADD_FAILURE() << "element (" << b << ", " << t << ", " << c << "), global index " << i;
      }
  EXPECT_EQ(wrong, 0u);
}

// The AVX2 Philox that dropout's CPU loop runs on AVX2 without AVX-512DQ, against philox_bits,
// over counters whose high word changes within the eight and keys and streams of every width.
TEST(Dropout, AvxPhiloxIsPhiloxBits) {
#if defined(__AVX2__)
  for (std::uint64_t seed : {0ull, 1234ull, 0xFEDCBA9876543210ull})
    for (std::uint64_t stream : {0ull, 7ull, 0x123456789ABCDEFull})
      for (std::uint64_t first : {0ull, 12345ull, 0xFFFFFFFCull, ~0ull - 7}) {
        std::uint32_t words[4 * 8];
        cpu::philox_bits_x8({seed, stream}, first, words, 8);
        for (int j = 0; j < 8; ++j) {
          const Philox4 want = philox_bits({seed, stream}, first + static_cast<std::uint64_t>(j));
          for (int w = 0; w < 4; ++w)
            EXPECT_EQ(words[w * 8 + j], want.v[w]) << seed << " " << stream << " " << first + j;
        }
      }
#else
  GTEST_SKIP() << "built without AVX2";
#endif
}

TEST(Dropout, BackwardMatchesFiniteDifferences) {
  constexpr int kB = 3, kT = 7, kC = 10;
  constexpr float kP = 0.3f;
  auto x = test::convert<double>(test::random_floats(kB * kT * kC, 5));
  const auto r = test::convert<double>(test::random_floats(kB * kT * kC, 6));
  std::vector<double> out(x.size());
  auto forward = [&] {
    cpu::dropout_forward<double>(out.data(), x.data(), kP, kStream, kB, kT, kC, 1, 2, 11);
    return test::dot(out, r);
  };
  const auto want = test::finite_difference_gradient(x, forward);
  std::vector<double> dx(x.size(), NAN);
  cpu::dropout_backward<double>(dx.data(), r.data(), kP, kStream, kB, kT, kC, 1, 2, 11);
  test::expect_close("dropout dx vs finite differences", dx, want, 1e-9, 1e-8);
}

TEST(Dropout, FloatOpMatchesDoubleTemplate) {
  constexpr int kB = 3, kT = 7, kC = 10;
  constexpr float kP = 0.25f;
  const auto xf = test::random_floats(kB * kT * kC, 7),
             doutf = test::random_floats(kB * kT * kC, 8);
  const auto x = test::convert<double>(xf), dout = test::convert<double>(doutf);
  std::vector<double> out(x.size()), dx(x.size());
  cpu::dropout_forward<double>(out.data(), x.data(), kP, kStream, kB, kT, kC, 2, 0, kT);
  cpu::dropout_backward<double>(dx.data(), dout.data(), kP, kStream, kB, kT, kC, 2, 0, kT);
  Tensor out_t = Tensor::empty({kB, kT, kC}), dx_t = Tensor::empty({kB, kT, kC});
  dropout_forward(out_t, Tensor::from_vector(xf, {kB, kT, kC}), kP, kStream, {2, 0, kT});
  dropout_backward(dx_t, Tensor::from_vector(doutf, {kB, kT, kC}), kP, kStream, {2, 0, kT});
  test::expect_close("dropout f32 out", out_t.to_vector(), out, 1e-7, 1e-7);
  test::expect_close("dropout f32 dx", dx_t.to_vector(), dx, 1e-7, 1e-7);
}

}  // namespace
}  // namespace ternion
