#include "layers/mixed_precision.h"

#include "kernels/convert.h"

namespace ternion {

Precision parse_precision(const std::string& text, const std::string& key) {
  if (text == "fp32") return Precision::F32;
  if (text == "bf16") return Precision::BF16;
  TN_THROW(ConfigError, key, ": expected fp32 or bf16, got '", text, "'");
}

const char* precision_name(Precision precision) {
  return precision == Precision::BF16 ? "bf16" : "fp32";
}

DType compute_dtype(Precision precision) {
  return precision == Precision::BF16 ? DType::BF16 : DType::F32;
}

void place_parameters(const std::vector<Parameter*>& params, Device device) {
  for (Parameter* p : params) {
    if (p->value.device() != device) p->value = p->value.to(device);
    if (p->grad.device() != device) p->grad = p->grad.to(device);
    if (p->compute.defined() && p->compute.device() != device) p->compute = p->compute.to(device);
  }
}

void set_compute_precision(const std::vector<Parameter*>& params, Precision precision) {
  for (Parameter* p : params) {
    if (precision == Precision::F32) {
      p->compute = Tensor();
      continue;
    }
    p->compute = Tensor::empty(p->value.shape(), compute_dtype(precision), p->value.device());
  }
  refresh_compute_copies(params);
}

void refresh_compute_copies(const std::vector<Parameter*>& params) {
  std::vector<Tensor> copies, masters;
  for (Parameter* p : params) {
    if (!p->compute.defined()) continue;
    copies.push_back(p->compute);  // a handle: converting into it writes the parameter's copy
    masters.push_back(p->value.contiguous());
  }
  convert_many(copies, masters);  // one launch on a GPU
}

}  // namespace ternion
