// The whole GPT on the GPU against the same model on the CPU: one micro-batch's forward (the
// per-token losses) and backward (every parameter's gradient), with the loss weight given at
// forward time (the LM head's fused cross-entropy, as the trainer runs it) and without, with
// and without dropout (the masks are the CPU's). F32 to float rounding; bf16 (compute copies,
// every GEMM epilogue) to its rounding, as relative L2 errors. The blocks' residual adds ride
// on the GEMMs there (one tensor rank), so this is the GPU test of the fused block.
#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "layers/gpt_model.h"
#include "layers/lm_head.h"
#include "layers/mixed_precision.h"

namespace ternion::test {
namespace {

ModelConfig small_config(double dropout) {
  ModelConfig c;
  c.vocab_size = 100;
  c.vocab_pad_multiple = 64;  // 128 columns: the cross-entropy's vector path
  c.seq_len = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 32;  // d_ff 128: the GELU epilogues' shapes
  c.dropout = dropout;
  c.init_std = 0.1;
  return c;
}

Tensor tokens_of(std::int64_t batch, std::int64_t seq, std::int64_t vocab, std::uint64_t seed) {
  const std::vector<std::int32_t> values =
      random_ints(static_cast<std::size_t>(batch * seq), seed, 0,
                  static_cast<std::int32_t>(vocab));
  return i32_tensor(values, {batch, seq});
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(err / std::max(norm, 1e-30));
}

struct ModelRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> grads;
};

// One micro-batch's forward and backward, on the CPU (F32) or the GPU in `precision`.
ModelRun run_model(const ModelConfig& config, Device device, Precision precision,
              bool weight_at_forward) {
  GptModel model(config);
  model.initialize(9);
  if (!device.is_cpu()) {
    place_parameters(model.parameters(), device);
    set_compute_precision(model.parameters(), precision);
  }
  model.zero_grad();
  const std::int64_t batch = 3, seq = config.seq_len;
  const float weight = 1.0f / static_cast<float>(batch * seq);
  MicroBatchInfo info;
  info.step = 2;
  info.seed = 4;
  if (weight_at_forward) info.loss_weight = weight;
  ActivationContext ctx(info);
  Tensor tokens = tokens_of(batch, seq, config.vocab_size, 1);
  Tensor targets = tokens_of(batch, seq, config.vocab_size, 2);
  if (!device.is_cpu()) {
    tokens = to_gpu(tokens, DType::I32);
    targets = to_gpu(targets, DType::I32);
  }
  const Tensor losses = model.forward_losses(tokens, targets, ctx);
  model.backward(weight, ctx);
  EXPECT_TRUE(ctx.empty());
  ModelRun run;
  run.losses = device.is_cpu() ? losses.to_vector() : to_host_floats(losses);
  for (Parameter* p : model.parameters())
    run.grads.push_back(device.is_cpu() ? p->grad.to_vector() : to_host_floats(p->grad));
  return run;
}

void compare(const std::string& label, const ModelRun& got, const ModelRun& want,
             double tolerance) {
  EXPECT_LT(relative_l2(got.losses, want.losses), tolerance) << label << ": losses";
  ASSERT_EQ(got.grads.size(), want.grads.size()) << label;
  for (std::size_t i = 0; i < got.grads.size(); ++i)
    EXPECT_LT(relative_l2(got.grads[i], want.grads[i]), tolerance) << label << ": gradient " << i;
}

TEST(GpuGptModel, F32ForwardBackwardMatchesCpu) {
  TN_REQUIRE_GPU();
  for (double dropout : {0.0, 0.1}) {
    const ModelConfig config = small_config(dropout);
    const ModelRun want = run_model(config, Device::cpu(), Precision::F32, true);
    for (bool weight_at_forward : {true, false}) {
      const std::string label = "f32, dropout " + std::to_string(dropout) +
                                (weight_at_forward ? ", fused head" : ", separate head");
      compare(label, run_model(config, gpu(), Precision::F32, weight_at_forward), want, 1e-4);
    }
  }
}

TEST(GpuGptModel, Bf16ForwardBackwardMatchesCpuToItsRounding) {
  TN_REQUIRE_GPU();
  for (double dropout : {0.0, 0.1}) {
    const ModelConfig config = small_config(dropout);
    const ModelRun want = run_model(config, Device::cpu(), Precision::F32, true);
    const ModelRun fused = run_model(config, gpu(), Precision::BF16, true);
    const std::string label = "bf16, dropout " + std::to_string(dropout);
    // bf16 weights and activations against the F32 model: a few bf16 steps (2^-8) through two
    // blocks and the head.
    compare(label, fused, want, 5e-2);
    // The fused head is bit for bit the separate one on the GPU too.
    const ModelRun separate = run_model(config, gpu(), Precision::BF16, false);
    EXPECT_EQ(fused.losses, separate.losses) << label;
    EXPECT_EQ(fused.grads, separate.grads) << label;
  }
}

}  // namespace
}  // namespace ternion::test
