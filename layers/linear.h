// Linear layers: y = act(x W^T + b), with W [out_features, in_features] (PyTorch's layout) and
// act the identity or GELU (tanh form). Inputs are [..., in_features]; all leading dimensions
// are rows. The forward is one op, kernels/linear.h (on GPU the bias rides on the GEMM).
//   backward: dz = act'(z) dy with z = x W^T + b (saved by the forward; dz = dy without act),
//             dx = dz W (returned), dW += dz^T x, db += sum_rows dz
//
// The tensor-parallel forms (Megatron-LM) split W over the ranks of a tensor-parallel group:
//
// ColumnParallelLinear: W split by output features (rows), b likewise. The input is whole on
//   every rank (copy_to_tensor_region: backward all-reduces dx) — or, with sequence
//   parallelism, a sequence shard that is all-gathered first (backward reduce-scatters).
//   The output is this rank's out_features / tp features ([..., out / tp]).
// RowParallelLinear: W split by input features (columns); the input is already split
//   ([..., in / tp], e.g. a column-parallel output). The partial products are summed over the
//   group (reduce_from_tensor_region; with sequence parallelism reduce-scattered along the
//   sequence), then the bias, replicated on every rank, is added once (with one rank there is
//   nothing to sum and the bias is the local GEMM's). No activation: it would have to follow
//   the reduction.
// A column-parallel activation is applied to this rank's features alone: GELU is elementwise,
// so it commutes with the split by output features.
//
// Backward through a GELU in one GEMM (the MLP): the layer after a GELU layer can take its
// input gradient on through that GELU, `backward(grad, ctx, gelu_layer.output_gelu(ctx))`,
// which gives the GELU layer's pre-activation gradient; the GELU layer then continues with
// `backward_pre_activation`. On CUDA in bf16 that is one GEMM with cuBLASLt's DGELU epilogue
// where the run-time GELU check agrees (kernels/linear.h: linear_backward_through_gelu). On
// CUDA a layer's bias gradient rides on its weight-gradient GEMM (linear_backward_weights),
// except the replicated bias of a row-parallel layer under tensor parallelism.
#pragma once

#include "kernels/linear.h"
#include "layers/layer.h"
#include "parallel/tensor_parallel.h"

namespace ternion {

// Which part of the whole weight this layer holds: part `index` of `parts` along `dim`
// (0 = output features, 1 = input features); the bias follows the output features.
struct WeightShard {
  std::int64_t dim = 0;
  std::int64_t parts = 1;
  std::int64_t index = 0;
};

// A GELU layer's saved pre-activation, for the backward of the layer that consumed its output.
struct OutputGelu {
  const Tensor* pre_activation = nullptr;
};

class Linear : public Layer {
 public:
  // in_features / out_features are the whole layer's.
  Linear(std::string name, std::int64_t in_features, std::int64_t out_features, bool bias,
         float init_std, WeightShard shard = {},
         LinearActivation activation = LinearActivation::none);
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  // forward(input) + residual ([..., out_features], the residual stream this layer's output
  // joins; no activation): on CUDA the GEMM adds it (kernels/linear.h).
  Tensor forward(const Tensor& input, ActivationContext& ctx, const Tensor& residual);
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  // The input was input_gelu's layer's output: returns that layer's pre-activation gradient.
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx, const OutputGelu& input_gelu);
  // A GELU layer's backward from its pre-activation's gradient (what the consumer's backward
  // through output_gelu returned).
  Tensor backward_pre_activation(const Tensor& grad_pre_activation, ActivationContext& ctx);
  // This micro-batch's pre-activation (a GELU layer, after forward).
  OutputGelu output_gelu(const ActivationContext& ctx);
  void collect_parameters(std::vector<Parameter*>& out) override;

  // The local weight's feature counts.
  std::int64_t in_features() const { return weight_.value.size(1); }
  std::int64_t out_features() const { return weight_.value.size(0); }

 private:
  struct Saved : SavedActivations {
    SavedInput input;       // [rows, in_features]; recomputed under selective recomputation
    Tensor pre_activation;  // [rows, out_features], x W^T + b; only with an activation
  };
  Tensor forward_impl(const Tensor& input, ActivationContext& ctx, const Tensor* residual);
  // grad_is_pre_activation: the activation's backward was done by the consumer;
  // input_gelu.pre_activation not null: go on through the previous layer's GELU.
  Tensor backward_impl(const Tensor& grad, ActivationContext& ctx, bool grad_is_pre_activation,
                       const OutputGelu& input_gelu);

  Parameter weight_;
  Parameter bias_;
  bool has_bias_;
  LinearActivation activation_;
};

class ColumnParallelLinear : public Layer {
 public:
  ColumnParallelLinear(std::string name, std::int64_t in_features, std::int64_t out_features,
                       bool bias, float init_std, const TensorParallel& tp,
                       LinearActivation activation = LinearActivation::none);
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  // As Linear's (this rank's features), the input gradient's communication included.
  Tensor backward_pre_activation(const Tensor& grad_pre_activation, ActivationContext& ctx);
  OutputGelu output_gelu(const ActivationContext& ctx) { return local_.output_gelu(ctx); }
  void collect_parameters(std::vector<Parameter*>& out) override { local_.collect_parameters(out); }

 private:
  TensorParallel tp_;
  Linear local_;
};

class RowParallelLinear : public Layer {
 public:
  RowParallelLinear(std::string name, std::int64_t in_features, std::int64_t out_features,
                    bool bias, float init_std, const TensorParallel& tp);
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  // forward(input) + residual (the output's shape): with one tensor rank the local GEMM adds
  // it, else it is added after the reduction and the bias.
  Tensor forward(const Tensor& input, ActivationContext& ctx, const Tensor& residual);
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  // The input was input_gelu's layer's output (this rank's features of it): as Linear's.
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx, const OutputGelu& input_gelu);
  void collect_parameters(std::vector<Parameter*>& out) override;
  std::int64_t in_features() const { return local_.in_features(); }  // this rank's

 private:
  Tensor forward_impl(const Tensor& input, ActivationContext& ctx, const Tensor* residual);

  TensorParallel tp_;
  Linear local_;    // the partial product; with one tensor rank, the whole layer and its bias
  Parameter bias_;  // replicated, added after the reduction (tensor parallel only)
  bool has_bias_;   // bias_ is in use
};

}  // namespace ternion
