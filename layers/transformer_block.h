// The pre-norm transformer block of every built-in family:
//   x = x + attention(norm_1(x))
//   x = x + mlp(norm_2(x))
// Registered as block type "transformer"; its parts are the model family's
// (layers/model_family.h): GPT-2's LayerNorms, causal self-attention and GELU MLP, or Llama's
// RMSNorms, grouped-query attention and SwiGLU MLP. Tensor parallel through its branches;
// under sequence parallelism the residual stream and both norms hold [batch, seq / tp, C].
#pragma once

#include <memory>

#include "layers/block_parts.h"
#include "layers/model_config.h"
#include "parallel/tensor_parallel.h"

namespace ternion {

struct TransformerBlockParts {
  std::unique_ptr<Norm> norm_1;
  std::unique_ptr<ResidualBranch> attention;
  std::unique_ptr<Norm> norm_2;
  std::unique_ptr<ResidualBranch> mlp;
};

class TransformerBlock : public Layer {
 public:
  // The block of `config`'s family, its parameters named under `name` ("h.3").
  TransformerBlock(std::string name, const ModelConfig& config, const TensorParallel& tp = {});
  TransformerBlock(std::string name, TransformerBlockParts parts);
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  double forward_flops_per_token(std::int64_t seq_len) override;

 private:
  TransformerBlockParts parts_;
};

}  // namespace ternion
