// AdamW and SGD on the GPU against the CPU updates (both run adamw_math.h's per-element
// functions), single-tensor and multi-tensor, over a few steps.
//
// The CPU (GCC) and the GPU (nvcc) each fuse a * b + c into one rounding where they choose, so
// the two devices may differ in the last bit of an element: the comparisons allow two ulps
// relative, and 2.5e-7 absolute (two ulps at 1) for values near zero, where a sum such as
// buf = momentum buf + g cancels and keeps its operands' rounding error.
// Between the GPU's single-tensor and multi-tensor kernels (one compiler, the same inline math)
// the bits must be equal.
#include "gpu_test_util.h"
#include "kernels/adamw.h"

namespace ternion::test {
namespace {

constexpr double kAtol = 2.5e-7;
constexpr double kTwoUlps = 2.4e-7;  // 2 * 2^-23: at least two ulps of any normal float
constexpr int kSteps = 3;

AdamWHyper adamw_hyper() {
  AdamWHyper h;
  h.lr = 1e-2f;
  h.beta1 = 0.9f;
  h.beta2 = 0.95f;
  h.eps = 1e-6f;
  h.weight_decay = 0.1f;
  h.grad_scale = 0.5f;
  return h;
}

// One tensor's operands on the CPU and on the GPU, from the same values.
struct TwinTensors {
  AdamWTensors cpu, gpu;
};

TwinTensors make_twins(std::int64_t n, std::uint64_t seed, float weight_decay) {
  const Tensor param = random_tensor({n}, seed);
  const Tensor m = random_tensor({n}, seed + 1, -0.1f, 0.1f);
  const Tensor v = random_tensor({n}, seed + 2, 0.01f, 1.0f);
  const Tensor grad = Tensor::zeros({n});
  return {{param.clone(), grad.clone(), m.clone(), v.clone(), weight_decay},
          {to_gpu(param), to_gpu(grad), to_gpu(m), to_gpu(v), weight_decay}};
}

void set_grad(TwinTensors& t, std::uint64_t seed) {
  const Tensor grad = random_tensor({t.cpu.param.numel()}, seed, -2.0f, 2.0f);
  t.cpu.grad.copy_from(grad);
  t.gpu.grad.copy_from(to_gpu(grad));
}

void expect_twins_close(const std::string& label, const TwinTensors& t) {
  expect_close(label + " param", to_host_floats(t.gpu.param), t.cpu.param.to_vector(), kAtol,
               kTwoUlps);
  expect_close(label + " m", to_host_floats(t.gpu.m), t.cpu.m.to_vector(), kAtol, kTwoUlps);
  expect_close(label + " v", to_host_floats(t.gpu.v), t.cpu.v.to_vector(), kAtol, kTwoUlps);
}

TEST(GpuAdamW, SingleTensorMatchesCpu) {
  TN_REQUIRE_GPU();
  TwinTensors t = make_twins(100003, 1, 0.1f);
  AdamWHyper h = adamw_hyper();
  for (int step = 1; step <= kSteps; ++step) {
    h.step = step;
    set_grad(t, 100 + step);
    adamw_update(t.cpu.param, t.cpu.grad, t.cpu.m, t.cpu.v, h);
    adamw_update(t.gpu.param, t.gpu.grad, t.gpu.m, t.gpu.v, h);
    expect_twins_close("adamw step " + std::to_string(step), t);
  }
}

TEST(GpuAdamW, ManyTensorsMatchCpuAndTheSingleTensorKernel) {
  TN_REQUIRE_GPU();
  // Tensors of one chunk (65536 elements), just over one, several, empty and tiny, then 150
  // small ones so that blocks search a long table; weight decays differ per tensor.
  std::vector<std::int64_t> sizes{65536, 65537, 200000, 0, 1, 7, 1000};
  for (int i = 0; i < 150; ++i) sizes.push_back((i * 7919) % 3000 + 1);
  std::vector<TwinTensors> twins;
  std::vector<AdamWTensors> singles;  // a GPU copy stepped by adamw_update, tensor by tensor
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const float weight_decay = i % 3 == 0 ? 0.0f : 0.1f * static_cast<float>(i % 5);
    twins.push_back(make_twins(sizes[i], 10 * i + 3, weight_decay));
    const AdamWTensors& g = twins.back().gpu;
    singles.push_back({g.param.clone(), g.grad.clone(), g.m.clone(), g.v.clone(), weight_decay});
  }
  AdamWHyper h = adamw_hyper();
  h.weight_decay = 123.0f;  // ignored by adamw_update_many
  for (int step = 1; step <= kSteps; ++step) {
    h.step = step;
    std::vector<AdamWTensors> cpu_many, gpu_many;
    for (std::size_t i = 0; i < twins.size(); ++i) {
      set_grad(twins[i], 1000 * step + i);
      singles[i].grad.copy_from(twins[i].gpu.grad);
      cpu_many.push_back(twins[i].cpu);  // Tensors share storage: the updates land in twins
      gpu_many.push_back(twins[i].gpu);
    }
    adamw_update_many(cpu_many, h);
    adamw_update_many(gpu_many, h);
    for (AdamWTensors& s : singles) {
      AdamWHyper own = h;
      own.weight_decay = s.weight_decay;
      adamw_update(s.param, s.grad, s.m, s.v, own);
    }
    for (std::size_t i = 0; i < twins.size(); ++i) {
      const std::string label =
          "adamw_many tensor " + std::to_string(i) + " step " + std::to_string(step);
      expect_twins_close(label, twins[i]);
      expect_bitwise_equal(label + " param vs single", to_host_floats(twins[i].gpu.param),
                           to_host_floats(singles[i].param));
      expect_bitwise_equal(label + " m vs single", to_host_floats(twins[i].gpu.m),
                           to_host_floats(singles[i].m));
      expect_bitwise_equal(label + " v vs single", to_host_floats(twins[i].gpu.v),
                           to_host_floats(singles[i].v));
    }
    if (HasFailure()) return;  // one step's report is enough
  }
}

TEST(GpuSgd, MatchesCpu) {
  TN_REQUIRE_GPU();
  const std::int64_t n = 70001;
  const Tensor p0 = random_tensor({n}, 4), buffer0 = random_tensor({n}, 5, -0.1f, 0.1f);
  Tensor cpu_param = p0.clone(), cpu_buffer = buffer0.clone();
  Tensor gpu_param = to_gpu(p0), gpu_buffer = to_gpu(buffer0);
  SgdHyper h;
  h.lr = 0.05f;
  h.momentum = 0.9f;
  h.weight_decay = 0.01f;
  h.grad_scale = 0.25f;
  for (int step = 1; step <= kSteps; ++step) {
    const Tensor grad = random_tensor({n}, 200 + step, -2.0f, 2.0f);
    sgd_update(cpu_param, grad, cpu_buffer, h);
    sgd_update(gpu_param, to_gpu(grad), gpu_buffer, h);
    const std::string at = " step " + std::to_string(step);
    expect_close("sgd param" + at, to_host_floats(gpu_param), cpu_param.to_vector(), kAtol,
                 kTwoUlps);
    expect_close("sgd momentum" + at, to_host_floats(gpu_buffer), cpu_buffer.to_vector(), kAtol,
                 kTwoUlps);
  }
}

}  // namespace
}  // namespace ternion::test
