// The reductions whose partitioning could follow the threads give bit-identical results with
// 1, 2 and 3 OpenMP threads: token-embedding backward, layer-norm backward, bias backward and
// sum_of_squares. (Shapes are large enough that every kernel takes its parallel path.)
#include <omp.h>

#include <functional>
#include <vector>

#include "kernels/bias_add.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/layer_norm.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

// Runs `compute` with each thread count and requires every result to equal the first.
void expect_thread_count_independent(const std::string& label,
                                     const std::function<std::vector<float>()>& compute) {
  const int saved = omp_get_max_threads();
  std::vector<float> reference;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> result = compute();
    if (threads == 1) {
      reference = std::move(result);
    } else {
      test::expect_bitwise_equal(label + " with " + std::to_string(threads) + " threads vs 1",
                                 result, reference);
    }
  }
  omp_set_num_threads(saved);
}

TEST(ThreadCount, TokenEmbeddingBackward) {
  constexpr int kTokens = 512, kV = 50, kC = 300;  // many repeats of each token
  Tensor tokens = test::i32_tensor(test::random_ints(kTokens, 1, 0, kV), {8, 64});
  Tensor dout = Tensor::from_vector(test::random_floats(kTokens * kC, 2), {8, 64, kC});
  expect_thread_count_independent("token_embedding_backward dwte", [&] {
    Tensor dwte = Tensor::zeros({kV, kC});
    token_embedding_backward(dwte, dout, tokens);
    return dwte.to_vector();
  });
}

TEST(ThreadCount, LayerNormBackward) {
  constexpr int kRows = 200, kCols = 300;
  Tensor x = Tensor::from_vector(test::random_floats(kRows * kCols, 3), {kRows, kCols});
  Tensor weight = Tensor::from_vector(test::random_floats(kCols, 4), {kCols});
  Tensor bias = Tensor::from_vector(test::random_floats(kCols, 5), {kCols});
  Tensor dout = Tensor::from_vector(test::random_floats(kRows * kCols, 6), {kRows, kCols});
  Tensor out = Tensor::empty({kRows, kCols}), mean = Tensor::empty({kRows}),
         rstd = Tensor::empty({kRows});
  layer_norm_forward(out, mean, rstd, x, weight, bias);
  expect_thread_count_independent("layer_norm_backward dx, dweight, dbias", [&] {
    Tensor dx = Tensor::empty({kRows, kCols}), dweight = Tensor::zeros({kCols}),
           dbias = Tensor::zeros({kCols});
    layer_norm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd);
    std::vector<float> all = dx.to_vector();
    for (const Tensor* t : {&dweight, &dbias}) {
      const auto v = t->to_vector();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  });
}

TEST(ThreadCount, BiasBackward) {
  constexpr int kRows = 300, kCols = 200;
  Tensor dout = Tensor::from_vector(test::random_floats(kRows * kCols, 7), {kRows, kCols});
  expect_thread_count_independent("bias_add_backward dbias", [&] {
    Tensor dbias = Tensor::zeros({kCols});
    bias_add_backward(dbias, dout);
    return dbias.to_vector();
  });
}

TEST(ThreadCount, SumOfSquares) {
  constexpr int kN = 200003;
  Tensor x = Tensor::from_vector(test::random_floats(kN, 8, -10.0f, 10.0f), {kN});
  const int saved = omp_get_max_threads();
  std::vector<double> results;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    results.push_back(sum_of_squares(x));
  }
  omp_set_num_threads(saved);
  test::expect_bitwise_equal("sum_of_squares with 1, 2, 3 threads",
                             std::vector<double>(3, results[0]), results);
}

}  // namespace
}  // namespace ternion
