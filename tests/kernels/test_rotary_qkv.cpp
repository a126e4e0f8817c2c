// Rotary position embedding with grouped-query packing: the forward against a loop written from
// the published formulas (with keys and values repeated per query head), r = 1 being GPT-2's
// per-head [q|k|v] with q and k turned, rotation's properties (pair norms kept, position 0 the
// identity, a later first_position continuing the sequence, the decoder's one-head helper), the
// backward against finite differences, the f32 op against the f64 template, the same bits with
// any thread count, bf16 staging, misuse.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bf16_test_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rotary_qkv.h"
#include "kernels/rotary_qkv_math.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

struct Case {
  std::int64_t batch, seq, kv_heads, queries_per_kv, head_size, first_position;
  double theta;

  std::int64_t in_width() const { return kv_heads * (queries_per_kv + 2) * head_size; }
  std::int64_t out_width() const { return kv_heads * queries_per_kv * 3 * head_size; }
  std::int64_t in_numel() const { return batch * seq * in_width(); }
  std::int64_t out_numel() const { return batch * seq * out_width(); }
  Shape in_shape() const { return {batch, seq, in_width()}; }
  Shape out_shape() const { return {batch, seq, out_width()}; }
  std::string name() const {
    return "r " + std::to_string(queries_per_kv) + ", G " + std::to_string(kv_heads) + ", hs " +
           std::to_string(head_size) + ", first_position " + std::to_string(first_position);
  }
};

// Shapes that are multiples of nothing; r = 1 (multi-head), 2 and 4; first positions 0 and > 0.
const Case kCases[] = {
    {2, 5, 3, 1, 6, 0, 10000.0},   {2, 5, 3, 1, 6, 11, 10000.0},  {1, 7, 2, 2, 10, 0, 10000.0},
    {3, 3, 2, 2, 10, 29, 500000.0}, {2, 4, 1, 4, 6, 3, 10000.0},  {1, 5, 2, 4, 14, 0, 10000.0},
};

// packed straight from the formulas: head h = g r + i takes query i of group g and key g turned
// to p = first_position + t, value g as is.
std::vector<double> reference_forward(const std::vector<double>& grouped, const Case& c) {
  const std::int64_t r = c.queries_per_kv, hs = c.head_size, half = hs / 2;
  std::vector<double> packed(static_cast<std::size_t>(c.out_numel()));
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t t = 0; t < c.seq; ++t) {
      const std::int64_t p = c.first_position + t;
      const double* in = grouped.data() + (b * c.seq + t) * c.in_width();
      double* out = packed.data() + (b * c.seq + t) * c.out_width();
      for (std::int64_t g = 0; g < c.kv_heads; ++g)
        for (std::int64_t i = 0; i < r; ++i)
          for (int part = 0; part < 3; ++part) {
            const std::int64_t source = g * (r + 2) + (part == 0 ? i : r + part - 1);
            const double* x = in + source * hs;
            double* y = out + ((g * r + i) * 3 + part) * hs;
            for (std::int64_t j = 0; j < hs; ++j) {
              if (part == 2) {
                y[j] = x[j];
                continue;
              }
              const std::int64_t m = j % half;
              const float inv_freq = 1.0f / std::pow(static_cast<float>(c.theta),
                                                     static_cast<float>(2 * m) / hs);
              const double angle = static_cast<double>(static_cast<float>(p) * inv_freq);
              y[j] = j < half ? x[j] * std::cos(angle) - x[j + half] * std::sin(angle)
                              : x[j] * std::cos(angle) + x[j - half] * std::sin(angle);
            }
          }
    }
  return packed;
}

std::vector<double> cpu_forward(const std::vector<double>& grouped, const Case& c) {
  std::vector<double> packed(static_cast<std::size_t>(c.out_numel()));
  cpu::rotary_qkv_forward<double>(packed.data(), grouped.data(), c.batch, c.seq, c.kv_heads,
                                  c.queries_per_kv, c.head_size, c.first_position, c.theta);
  return packed;
}

std::vector<double> random_doubles(std::int64_t n, std::uint64_t seed) {
  return test::convert<double>(test::random_floats(static_cast<std::size_t>(n), seed));
}

TEST(RotaryQkv, ForwardMatchesTheFormulas) {
  std::uint64_t seed = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name());
    const auto grouped = random_doubles(c.in_numel(), seed++);
    test::expect_close("rotary_qkv forward", cpu_forward(grouped, c), reference_forward(grouped, c),
                       1e-14, 1e-14);
  }
}

TEST(RotaryQkv, OneQueryPerKeyIsThePerHeadQkvLayout) {
  // r = 1: grouped's [q|k|v] per group is attention's per-head layout; at position 0 the op is a
  // copy, and elsewhere the values pass unchanged while q and k are turned.
  const Case c{2, 6, 3, 1, 8, 0, 10000.0};
  const auto grouped = random_doubles(c.in_numel(), 7);
  const auto packed = cpu_forward(grouped, c);
  const std::int64_t hs = c.head_size;
  for (std::int64_t row = 0; row < c.batch * c.seq; ++row)
    for (std::int64_t col = 0; col < c.out_width(); ++col) {
      const double got = packed[row * c.out_width() + col];
      const double x = grouped[row * c.in_width() + col];
      if (row % c.seq == 0 || (col / hs) % 3 == 2) {
        ASSERT_EQ(got, x) << "row " << row << ", column " << col;
      }
    }
  const auto pair_norms_kept = [&](const Case& shifted) {
    const auto turned = cpu_forward(grouped, shifted);
    const std::int64_t half = hs / 2;
    for (std::int64_t head = 0; head < c.batch * c.seq * c.out_width() / hs; ++head)
      for (std::int64_t j = 0; j < half; ++j) {
        const double* y = turned.data() + head * hs;
        const double* x = grouped.data() + head * hs;  // r = 1: the same columns
        EXPECT_NEAR(std::hypot(y[j], y[j + half]), std::hypot(x[j], x[j + half]), 1e-14)
            << "head " << head << ", pair " << j;
      }
  };
  pair_norms_kept(c);
  pair_norms_kept({2, 6, 3, 1, 8, 1000, 10000.0});
}

TEST(RotaryQkv, FirstPositionContinuesTheSequence) {
  // Rows t of a call at first_position k are rows k + t of a call at 0: what a KV cache relies on.
  const Case whole{1, 9, 2, 2, 6, 0, 10000.0}, tail{1, 4, 2, 2, 6, 5, 10000.0};
  const auto grouped = random_doubles(whole.in_numel(), 8);
  const std::vector<double> tail_in(grouped.begin() + 5 * whole.in_width(), grouped.end());
  const auto want = cpu_forward(grouped, whole);
  test::expect_close("rows 5.. at first_position 5", cpu_forward(tail_in, tail),
                     std::vector<double>(want.begin() + 5 * whole.out_width(), want.end()), 0, 0);
}

TEST(RotaryQkv, DecoderHelperTurnsAHeadAsTheOpDoes) {
  const Case c{1, 3, 2, 2, 10, 17, 10000.0};
  const auto grouped = test::random_floats(static_cast<std::size_t>(c.in_numel()), 9);
  Tensor packed = Tensor::empty(c.out_shape());
  rotary_qkv_forward(packed, Tensor::from_vector(grouped, c.in_shape()), c.kv_heads,
                     c.queries_per_kv, c.first_position, c.theta);
  const auto got = packed.to_vector();
  const std::int64_t hs = c.head_size;
  for (std::int64_t t = 0; t < c.seq; ++t) {
    // Head 3 = query 1 of group 1 and key 1.
    std::vector<float> q(grouped.begin() + t * c.in_width() + 5 * hs,
                         grouped.begin() + t * c.in_width() + 6 * hs);
    std::vector<float> k(grouped.begin() + t * c.in_width() + 6 * hs,
                         grouped.begin() + t * c.in_width() + 7 * hs);
    rotary_rotate_head(q.data(), q.data(), hs, c.first_position + t, c.theta);
    rotary_rotate_head(k.data(), k.data(), hs, c.first_position + t, c.theta);
    const auto head = got.begin() + t * c.out_width() + 3 * 3 * hs;
    test::expect_close("decoder query", q, std::vector<float>(head, head + hs), 1e-6, 1e-6);
    test::expect_close("decoder key", k, std::vector<float>(head + hs, head + 2 * hs), 1e-6,
                       1e-6);
  }
}

TEST(RotaryQkv, BackwardMatchesFiniteDifferences) {
  std::uint64_t seed = 20;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name());
    auto grouped = random_doubles(c.in_numel(), seed++);
    const auto weights = random_doubles(c.out_numel(), seed++);
    auto want = test::finite_difference_gradient(
        grouped, [&] { return test::dot(cpu_forward(grouped, c), weights); });
    std::vector<double> dgrouped(static_cast<std::size_t>(c.in_numel()), NAN);
    cpu::rotary_qkv_backward<double>(dgrouped.data(), weights.data(), c.batch, c.seq, c.kv_heads,
                                     c.queries_per_kv, c.head_size, c.first_position, c.theta);
    test::expect_close("rotary_qkv dgrouped vs finite differences", dgrouped, want, 1e-8, 1e-7);
  }
}

TEST(RotaryQkv, FloatOpMatchesDoubleTemplate) {
  std::uint64_t seed = 40;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name());
    const auto groupedf = test::random_floats(static_cast<std::size_t>(c.in_numel()), seed++);
    const auto dpackedf = test::random_floats(static_cast<std::size_t>(c.out_numel()), seed++);
    const auto dpacked = test::convert<double>(dpackedf);
    std::vector<double> dgrouped(static_cast<std::size_t>(c.in_numel()));
    cpu::rotary_qkv_backward<double>(dgrouped.data(), dpacked.data(), c.batch, c.seq, c.kv_heads,
                                     c.queries_per_kv, c.head_size, c.first_position, c.theta);

    Tensor packed = Tensor::full(c.out_shape(), NAN), dgrouped_t = Tensor::full(c.in_shape(), NAN);
    rotary_qkv_forward(packed, Tensor::from_vector(groupedf, c.in_shape()), c.kv_heads,
                       c.queries_per_kv, c.first_position, c.theta);
    rotary_qkv_backward(dgrouped_t, Tensor::from_vector(dpackedf, c.out_shape()), c.kv_heads,
                        c.queries_per_kv, c.first_position, c.theta);
    test::expect_close("rotary_qkv f32 packed", packed.to_vector(),
                       cpu_forward(test::convert<double>(groupedf), c), 1e-6, 1e-6);
    test::expect_close("rotary_qkv f32 dgrouped", dgrouped_t.to_vector(), dgrouped, 2e-6, 1e-6);
  }
}

TEST(RotaryQkv, ThreadCountDoesNotChangeBits) {
  // Large enough for the parallel path; the key and value sums must not follow the threads.
  const Case c{2, 40, 4, 2, 16, 9, 10000.0};
  const Tensor grouped = test::random_f32(c.in_shape(), 50);
  const Tensor dpacked = test::random_f32(c.out_shape(), 51);
  const int saved = omp_get_max_threads();
  std::vector<float> want_packed, want_dgrouped;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Tensor packed = Tensor::empty(c.out_shape()), dgrouped = Tensor::empty(c.in_shape());
    rotary_qkv_forward(packed, grouped, c.kv_heads, c.queries_per_kv, c.first_position, c.theta);
    rotary_qkv_backward(dgrouped, dpacked, c.kv_heads, c.queries_per_kv, c.first_position,
                        c.theta);
    if (threads == 1) {
      want_packed = packed.to_vector();
      want_dgrouped = dgrouped.to_vector();
    } else {
      const std::string label = " with " + std::to_string(threads) + " threads vs 1";
      test::expect_bitwise_equal("rotary_qkv packed" + label, packed.to_vector(), want_packed);
      test::expect_bitwise_equal("rotary_qkv dgrouped" + label, dgrouped.to_vector(),
                                 want_dgrouped);
    }
  }
  omp_set_num_threads(saved);
}

TEST(RotaryQkv, Bf16IsTheF32OpOnRoundedInputs) {
  using test::random_f32;
  using test::rounded;
  using test::to_bf16;
  const Case c{2, 5, 2, 4, 6, 3, 10000.0};
  const Tensor grouped = random_f32(c.in_shape(), 60), dpacked = random_f32(c.out_shape(), 61);
  Tensor want_packed = Tensor::empty(c.out_shape()), want_dgrouped = Tensor::empty(c.in_shape());
  rotary_qkv_forward(want_packed, rounded(grouped), c.kv_heads, c.queries_per_kv,
                     c.first_position, c.theta);
  rotary_qkv_backward(want_dgrouped, rounded(dpacked), c.kv_heads, c.queries_per_kv,
                      c.first_position, c.theta);

  Tensor packed = Tensor::empty(c.out_shape(), DType::BF16);
  Tensor dgrouped = Tensor::empty(c.in_shape(), DType::BF16);
  rotary_qkv_forward(packed, to_bf16(grouped), c.kv_heads, c.queries_per_kv, c.first_position,
                     c.theta);
  rotary_qkv_backward(dgrouped, to_bf16(dpacked), c.kv_heads, c.queries_per_kv, c.first_position,
                      c.theta);
  test::expect_bitwise_equal("bf16 rotary_qkv packed", as_f32(packed).to_vector(),
                             rounded(want_packed).to_vector());
  test::expect_bitwise_equal("bf16 rotary_qkv dgrouped", as_f32(dgrouped).to_vector(),
                             rounded(want_dgrouped).to_vector());

  Tensor f32_packed = Tensor::empty(c.out_shape());
  EXPECT_THROW(rotary_qkv_forward(f32_packed, to_bf16(grouped), c.kv_heads, c.queries_per_kv, 0,
                                  c.theta),
               InternalError)
      << "mixed dtypes";
}

// The op's message, or "" where it did not throw.
template <class Call>
std::string refusal(Call call) {
  try {
    call();
  } catch (const InternalError& e) {
    return e.what();
  }
  return "";
}

// Llama 3.1's scaling against transformers' formula, written here in double from its source
// (modeling_rope_utils._compute_llama3_parameters): Llama-3.2-1B's parameters (head 64, theta
// 500000, factor 32, frequency factors 1 and 4, original context 8192) reach all three bands.
TEST(RotaryQkv, Llama3ScalingIsTransformers) {
  RotaryParameters rope(500000.0);
  rope.scaling_factor = 32;
  rope.low_freq_factor = 1;
  rope.high_freq_factor = 4;
  rope.original_context = 8192;
  const std::int64_t hs = 64;
  int kept = 0, divided = 0, blended = 0;
  for (std::int64_t i = 0; i < hs / 2; ++i) {
    const double inv_freq = 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / hs);
    const double wavelength = 2.0 * M_PI / inv_freq;
    double want = inv_freq;
    if (wavelength > 8192.0 / 1.0) {
      want = inv_freq / 32.0;
      ++divided;
    } else if (wavelength >= 8192.0 / 4.0) {
      const double smooth = (8192.0 / wavelength - 1.0) / (4.0 - 1.0);
      want = (1.0 - smooth) * inv_freq / 32.0 + smooth * inv_freq;
      ++blended;
    } else {
      ++kept;
    }
    EXPECT_NEAR(rotary_inv_freq(i, hs, rope), want, 2e-6 * want) << "pair " << i;
    EXPECT_FLOAT_EQ(rotary_inv_freq(i, hs, RotaryParameters(500000.0)),
                    static_cast<float>(inv_freq)) << "pair " << i << " unscaled";
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

TEST(RotaryQkv, RefusesMisuse) {
  const auto contains = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  // G 2, r 2, hs 5: width 2 * 4 * 5 = 40, packed 2 * 2 * 3 * 5 = 60.
  Tensor odd_in = Tensor::zeros({1, 3, 40}), odd_out = Tensor::empty({1, 3, 60});
  std::string message = refusal([&] { rotary_qkv_forward(odd_out, odd_in, 2, 2, 0, 1e4); });
  EXPECT_TRUE(contains(message, "rotary_qkv_forward") && contains(message, "odd")) << message;
  message = refusal([&] { rotary_qkv_backward(odd_in, odd_out, 2, 2, 0, 1e4); });
  EXPECT_TRUE(contains(message, "rotary_qkv_backward") && contains(message, "odd")) << message;

  // G 2, r 2, hs 6: grouped width 48, packed 72.
  Tensor grouped = Tensor::zeros({2, 3, 48}), packed = Tensor::empty({2, 3, 72});
  EXPECT_NO_THROW(rotary_qkv_forward(packed, grouped, 2, 2, 0, 1e4));
  EXPECT_NO_THROW(rotary_qkv_backward(grouped, packed, 2, 2, 0, 1e4));
  message = refusal([&] { rotary_qkv_forward(packed, Tensor::zeros({2, 3, 50}), 2, 2, 0, 1e4); });
  EXPECT_TRUE(contains(message, "grouped width 50")) << message;
  Tensor narrow = Tensor::empty({2, 3, 66});
  message = refusal([&] { rotary_qkv_forward(narrow, grouped, 2, 2, 0, 1e4); });
  EXPECT_TRUE(contains(message, "[2, 3, 72]")) << message;
  Tensor other_seq = Tensor::empty({2, 4, 72});
  EXPECT_THROW(rotary_qkv_forward(other_seq, grouped, 2, 2, 0, 1e4), InternalError);
  EXPECT_THROW(rotary_qkv_forward(packed, grouped, 2, 1, 0, 1e4), InternalError)
      << "queries_per_kv 1 makes head size 8 and packed width 48";
  EXPECT_THROW(rotary_qkv_forward(packed, grouped, 0, 2, 0, 1e4), InternalError);
  EXPECT_THROW(rotary_qkv_forward(packed, grouped, 2, 0, 0, 1e4), InternalError);
  EXPECT_THROW(rotary_qkv_forward(packed, grouped, 2, 2, -1, 1e4), InternalError);
  EXPECT_THROW(rotary_qkv_forward(packed, grouped, 2, 2, 0, 0.0), InternalError);
  RotaryParameters backwards(1e4);
  backwards.scaling_factor = 8;
  backwards.low_freq_factor = 4;
  backwards.high_freq_factor = 1;
  message = refusal([&] { rotary_qkv_forward(packed, grouped, 2, 2, 0, backwards); });
  EXPECT_TRUE(contains(message, "0 < low < high")) << message;
  EXPECT_THROW(rotary_qkv_forward(packed, grouped.view({6, 48}), 2, 2, 0, 1e4), InternalError);
  // r = 1 keeps the width; writing over the input is still refused.
  Tensor mha = Tensor::zeros({1, 2, 18});
  message = refusal([&] { rotary_qkv_forward(mha, mha, 1, 1, 0, 1e4); });
  EXPECT_TRUE(contains(message, "alias")) << message;
}

}  // namespace
}  // namespace ternion
