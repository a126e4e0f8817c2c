// Linear: y = x W^T + b, with W [out_features, in_features] (PyTorch's layout) and b
// [out_features]. Inputs are [..., in_features]; all leading dimensions are rows.
//   backward: dx = dy W (returned), dW += dy^T x, db += sum_rows dy
#pragma once

#include "layers/layer.h"

namespace ternion {

class Linear : public Layer {
 public:
  Linear(std::string name, std::int64_t in_features, std::int64_t out_features, bool bias,
         float init_std);
  Tensor forward(const Tensor& input, ActivationContext& ctx) override;
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override;
  void collect_parameters(std::vector<Parameter*>& out) override;

  std::int64_t in_features() const { return in_features_; }
  std::int64_t out_features() const { return out_features_; }

 private:
  struct Saved : SavedActivations {
    Tensor input;
  };
  std::int64_t in_features_;
  std::int64_t out_features_;
  Parameter weight_;
  Parameter bias_;
  bool has_bias_;
};

}  // namespace ternion
