// AdamW and SGD updates against scalar reference implementations over a few steps (bias
// correction, weight decay, gradient scale).
#include <cmath>
#include <vector>

#include "kernels/adamw.h"
#include "tests/test_util.h"

namespace ternion {
namespace {

constexpr int kN = 40003;  // past the parallel threshold, not a multiple of any vector width
constexpr int kSteps = 3;

TEST(AdamW, MatchesScalarReference) {
  const auto p0 = test::random_floats(kN, 1);
  AdamWHyper h;
  h.lr = 1e-2f;
  h.beta1 = 0.9f;
  h.beta2 = 0.95f;
  h.eps = 1e-6f;
  h.weight_decay = 0.1f;
  h.grad_scale = 0.5f;
  Tensor param = Tensor::from_vector(p0, {kN}), m = Tensor::zeros({kN}), v = Tensor::zeros({kN});
  std::vector<double> ref_p = test::convert<double>(p0), ref_m(kN, 0.0), ref_v(kN, 0.0);
  for (int step = 1; step <= kSteps; ++step) {
    const auto grad = test::random_floats(kN, 100 + step, -2.0f, 2.0f);
    h.step = step;
    adamw_update(param, Tensor::from_vector(grad, {kN}), m, v, h);
    const double b1 = h.beta1, b2 = h.beta2;
    for (int i = 0; i < kN; ++i) {
      const double g = static_cast<double>(grad[i]) * h.grad_scale;
      ref_m[i] = b1 * ref_m[i] + (1 - b1) * g;
      ref_v[i] = b2 * ref_v[i] + (1 - b2) * g * g;
      const double m_hat = ref_m[i] / (1 - std::pow(b1, step));
      const double v_hat = ref_v[i] / (1 - std::pow(b2, step));
      ref_p[i] -= double(h.lr) * (m_hat / (std::sqrt(v_hat) + h.eps) + h.weight_decay * ref_p[i]);
    }
    const std::string at = " after step " + std::to_string(step);
    test::expect_close("adamw param" + at, param.to_vector(), ref_p, 1e-6, 1e-6);
    test::expect_close("adamw m" + at, m.to_vector(), ref_m, 1e-7, 1e-5);
    test::expect_close("adamw v" + at, v.to_vector(), ref_v, 1e-8, 1e-5);
  }
}

TEST(Sgd, MatchesScalarReference) {
  const auto p0 = test::random_floats(kN, 2);
  SgdHyper h;
  h.lr = 0.05f;
  h.momentum = 0.9f;
  h.weight_decay = 0.01f;
  h.grad_scale = 0.25f;
  Tensor param = Tensor::from_vector(p0, {kN}), buf = Tensor::zeros({kN});
  std::vector<double> ref_p = test::convert<double>(p0), ref_buf(kN, 0.0);
  for (int step = 1; step <= kSteps; ++step) {
    const auto grad = test::random_floats(kN, 200 + step, -2.0f, 2.0f);
    sgd_update(param, Tensor::from_vector(grad, {kN}), buf, h);
    for (int i = 0; i < kN; ++i) {
      const double g =
          static_cast<double>(grad[i]) * h.grad_scale + double(h.weight_decay) * ref_p[i];
      ref_buf[i] = double(h.momentum) * ref_buf[i] + g;
      ref_p[i] -= double(h.lr) * ref_buf[i];
    }
    const std::string at = " after step " + std::to_string(step);
    test::expect_close("sgd param" + at, param.to_vector(), ref_p, 1e-6, 1e-6);
    test::expect_close("sgd momentum buffer" + at, buf.to_vector(), ref_buf, 1e-6, 1e-5);
  }
}

}  // namespace
}  // namespace ternion
