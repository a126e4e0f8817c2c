// Our parameters by name as an export to a Hugging Face family takes them: each taken once,
// with its shape checked; whatever is left over afterwards is a parameter the mapping does not
// know, which would otherwise be dropped from the export without a word.
#pragma once

#include <map>
#include <set>
#include <string>

#include "framework/error.h"
#include "framework/tensor.h"

namespace ternion {

class ParameterSource {
 public:
  // `family`: the export's family in messages ("GPT-2").
  ParameterSource(const std::map<std::string, Tensor>& params, std::string family)
      : params_(params), family_(std::move(family)) {}

  Tensor take(const std::string& name, const Shape& shape) {
    const auto it = params_.find(name);
    if (it == params_.end())
      TN_THROW(CheckpointError, "cannot export to ", family_, ": parameter '", name,
               "' is missing");
    const Tensor& t = it->second;
    TN_CHECK(t.defined() && t.device().is_cpu(), "parameter '", name, "' is not a CPU tensor");
    if (t.shape() != shape)
      TN_THROW(CheckpointError, "cannot export to ", family_, ": parameter '", name, "' is ",
               shape_str(t.shape()), ", expected ", shape_str(shape));
    taken_.insert(name);
    return t.contiguous();
  }

  void check_all_taken() const {
    for (const auto& [name, t] : params_)
      if (!taken_.count(name))
        TN_THROW(CheckpointError, "cannot export to ", family_, ": parameter '", name,
                 "' has no ", family_, " counterpart (only the \"transformer\" block is "
                 "supported)");
  }

 private:
  const std::map<std::string, Tensor>& params_;
  std::string family_;
  std::set<std::string> taken_;
};

}  // namespace ternion
