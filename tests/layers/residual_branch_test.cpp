// The layer pieces the transformer block's fusions rest on, on the CPU:
// - project_onto_residual (layers/residual_branch.h) against what it replaces, the branch's
//   output projection and dropout followed by the block's add, bit for bit, with dropout active
//   and inactive, forward and backward;
// - the MLP's backward through its GELU (OutputGelu, backward_pre_activation) refusing misuse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "framework/philox.h"
#include "kernels/elementwise.h"
#include "layers/residual_branch.h"

namespace ternion {
namespace {

Tensor random(const Shape& shape, std::uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = philox_normal({seed, 3}, i);
  return t;
}

// Both layers of a branch, initialised identically for every instance (names key the RNG).
struct Branch {
  RowParallelLinear proj{"blk.proj", 12, 8, /*bias=*/true, 0.2f, TensorParallel{}};
  Dropout dropout;
  explicit Branch(float p) : dropout("blk.dropout", p) {
    for (Parameter* param : proj.parameters()) {
      initialize_parameter(*param, 5);
      if (param->value.dim() == 1) param->value.copy_from(random(param->value.shape(), 6));
    }
  }
};

std::vector<float> grads_of(RowParallelLinear& proj) {
  std::vector<float> all;
  for (Parameter* p : proj.parameters()) {
    const std::vector<float> g = p->grad.to_vector();
    all.insert(all.end(), g.begin(), g.end());
  }
  return all;
}

TEST(ResidualBranch, IsTheBranchThenTheBlockAdd) {
  struct Case {
    float p;
    bool training;
  };
  for (const Case c : {Case{0.3f, true}, Case{0.3f, false}, Case{0.0f, true}}) {
    const std::string label =
        "p " + std::to_string(c.p) + (c.training ? ", training" : ", evaluation");
    const Tensor x = random({2, 5, 12}, 1), residual = random({2, 5, 8}, 2);
    const Tensor dy = random({2, 5, 8}, 3);
    MicroBatchInfo info;
    info.training = c.training;
    info.step = 3;
    info.seed = 7;

    Branch fused(c.p), composed(c.p);
    ActivationContext fused_ctx(info), composed_ctx(info);
    const Tensor got = project_onto_residual(fused.proj, fused.dropout, x, &residual, fused_ctx);
    const Tensor branch =
        composed.dropout.forward(composed.proj.forward(x, composed_ctx), composed_ctx);
    Tensor want = Tensor::empty(residual.shape());
    add(want, residual, branch);
    EXPECT_EQ(got.to_vector(), want.to_vector()) << label;

    // The undropped branch differs where dropout is active: the comparison above can fail.
    if (c.p > 0 && c.training) {
      Branch plain(0.0f);
      ActivationContext plain_ctx(info);
      const Tensor undropped =
          project_onto_residual(plain.proj, plain.dropout, x, &residual, plain_ctx);
      EXPECT_NE(undropped.to_vector(), got.to_vector()) << label;
    }

    const Tensor fused_dx = fused.proj.backward(fused.dropout.backward(dy, fused_ctx), fused_ctx);
    const Tensor composed_dx =
        composed.proj.backward(composed.dropout.backward(dy, composed_ctx), composed_ctx);
    EXPECT_EQ(fused_dx.to_vector(), composed_dx.to_vector()) << label;
    EXPECT_EQ(grads_of(fused.proj), grads_of(composed.proj)) << label;
    EXPECT_TRUE(fused_ctx.empty() && composed_ctx.empty()) << label;
  }
}

TEST(ResidualBranch, ThroughGeluMisuseIsRefused) {
  Linear plain("plain", 4, 6, /*bias=*/true, 0.2f);
  Linear with_gelu("fc", 4, 6, /*bias=*/true, 0.2f, {}, LinearActivation::gelu);
  ActivationContext ctx(MicroBatchInfo{});
  plain.forward(random({3, 4}, 4), ctx);
  EXPECT_THROW(plain.output_gelu(ctx), InternalError);
  EXPECT_THROW(plain.backward_pre_activation(random({3, 6}, 5), ctx), InternalError);
  // Before its forward a GELU layer has no pre-activation to give.
  EXPECT_THROW(with_gelu.output_gelu(ctx), InternalError);
  with_gelu.forward(random({3, 4}, 6), ctx);
  const OutputGelu gelu = with_gelu.output_gelu(ctx);
  ASSERT_NE(gelu.pre_activation, nullptr);
  EXPECT_EQ(gelu.pre_activation->shape(), (Shape{3, 6}));
  // A consumer whose input does not have the pre-activation's shape is refused before any
  // gradient accumulates.
  Linear consumer("proj", 5, 2, /*bias=*/true, 0.2f);
  consumer.forward(random({3, 5}, 7), ctx);
  EXPECT_THROW(consumer.backward(random({3, 2}, 8), ctx, gelu), InternalError);
  for (Parameter* p : consumer.parameters())
    for (float g : p->grad.to_vector()) EXPECT_EQ(g, 0.0f) << p->name;
}

}  // namespace
}  // namespace ternion
