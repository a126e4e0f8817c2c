#include "layers/layer_registry.h"

#include <gtest/gtest.h>

#include "layers/gpt_model.h"

namespace ternion {
namespace {

// A block a user might add: the identity, with one parameter so it shows in the model.
class IdentityBlock : public Layer {
 public:
  explicit IdentityBlock(const BlockSpec& spec)
      : Layer(spec.name),
        gain_(make_parameter(spec.name + ".gain", {1}, ParameterInit::Ones, 0, false)) {}
  Tensor forward(const Tensor& input, ActivationContext&) override { return input; }
  Tensor backward(const Tensor& grad_output, ActivationContext&) override { return grad_output; }
  void collect_parameters(std::vector<Parameter*>& out) override { out.push_back(&gain_); }

 private:
  Parameter gain_;
};

TEST(LayerRegistry, BuiltInTransformerBlockIsRegistered) {
  EXPECT_TRUE(LayerRegistry::instance().has("transformer"));
  EXPECT_FALSE(LayerRegistry::instance().has("no-such-block"));
}

TEST(LayerRegistry, AUserBlockIsSelectableByName) {
  LayerRegistry::instance().add("identity_for_test", [](const BlockSpec& spec) {
    return std::make_unique<IdentityBlock>(spec);
  });
  ModelConfig c;
  c.vocab_size = 16;
  c.vocab_pad_multiple = 16;
  c.seq_len = 4;
  c.n_layer = 3;
  c.n_head = 1;
  c.d_model = 8;
  c.block = "identity_for_test";
  GptModel model(c);
  std::vector<std::string> names;
  for (Parameter* p : model.parameters()) names.push_back(p->name);
  EXPECT_EQ(names, (std::vector<std::string>{"wte", "wpe", "h.0.gain", "h.1.gain", "h.2.gain",
                                             "ln_f.weight", "ln_f.bias"}));
  EXPECT_NE(LayerRegistry::instance().names().find("identity_for_test"), std::string::npos);
}

TEST(LayerRegistry, UnknownTypeIsAConfigError) {
  ModelConfig c;
  c.block = "no-such-block";
  EXPECT_THROW(GptModel model(c), ConfigError);
}

}  // namespace
}  // namespace ternion
