// matmul against a naive triple loop: all four transpose combinations, alpha and beta, and
// beta = 0 overwriting whatever out held.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/matmul.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

using test::random_floats;

// out = alpha * op(a) op(b) + beta * out in double; a, b stored row-major as matmul.h says.
std::vector<double> naive_matmul(const std::vector<float>& a, const std::vector<float>& b,
                                 std::vector<double> out, int m, int n, int k, bool ta, bool tb,
                                 double alpha, double beta) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const double av = ta ? a[p * m + i] : a[i * k + p];
        const double bv = tb ? b[j * k + p] : b[p * n + j];
        sum += av * bv;
      }
      out[i * n + j] = alpha * sum + (beta == 0 ? 0.0 : beta * out[i * n + j]);
    }
  }
  return out;
}

struct MatmulCase {
  int m, n, k;
  float alpha, beta;
};

void check_all_transposes(const MatmulCase& c, std::uint64_t seed) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const std::string label = "matmul m" + std::to_string(c.m) + " n" + std::to_string(c.n) +
                                " k" + std::to_string(c.k) + (ta ? " a^T" : " a") +
                                (tb ? " b^T" : " b") + " alpha " + std::to_string(c.alpha) +
                                " beta " + std::to_string(c.beta);
      const auto a = random_floats(static_cast<std::size_t>(c.m * c.k), seed);
      const auto b = random_floats(static_cast<std::size_t>(c.k * c.n), seed + 1);
      const auto out0 = random_floats(static_cast<std::size_t>(c.m * c.n), seed + 2);
      const auto want =
          naive_matmul(a, b, test::convert<double>(out0), c.m, c.n, c.k, ta, tb, c.alpha, c.beta);

      Tensor a_tensor = Tensor::from_vector(a, ta ? Shape{c.k, c.m} : Shape{c.m, c.k});
      Tensor b_tensor = Tensor::from_vector(b, tb ? Shape{c.n, c.k} : Shape{c.k, c.n});
      Tensor out = Tensor::from_vector(out0, {c.m, c.n});
      matmul(out, a_tensor, b_tensor, ta, tb, c.alpha, c.beta);
      test::expect_close(label + " f32", out.to_vector(), want, 1e-5, 1e-5);

      auto ad = test::convert<double>(a), bd = test::convert<double>(b);
      auto outd = test::convert<double>(out0);
      cpu::matmul<double>(outd.data(), ad.data(), bd.data(), c.m, c.n, c.k, ta, tb, c.alpha,
                          c.beta);
      test::expect_close(label + " f64", outd, want, 1e-13, 1e-13);
    }
  }
}

TEST(Matmul, AllTransposesMatchNaiveLoop) {
  check_all_transposes({7, 5, 10, 1.0f, 0.0f}, 11);
  check_all_transposes({67, 45, 131, 1.0f, 0.0f}, 12);  // past OpenBLAS's small-matrix path
}

TEST(Matmul, AlphaAndBeta) {
  check_all_transposes({7, 5, 10, 0.75f, -0.5f}, 21);
  check_all_transposes({9, 13, 3, -2.0f, 1.0f}, 22);  // accumulate, as dW += dy^T x
}

TEST(Matmul, BetaZeroOverwritesGarbage) {
  const auto a = random_floats(6 * 4, 31), b = random_floats(4 * 5, 32);
  Tensor out = Tensor::full({6, 5}, NAN);
  Tensor a_tensor = Tensor::from_vector(a, {6, 4}), b_tensor = Tensor::from_vector(b, {4, 5});
  matmul(out, a_tensor, b_tensor, false, false);
  const auto want = naive_matmul(a, b, std::vector<double>(30, 0.0), 6, 5, 4, false, false, 1, 0);
  test::expect_close("matmul beta 0 over NaN", out.to_vector(), want, 1e-6, 1e-6);
}

}  // namespace
}  // namespace ternion
