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

// A small model of `block`'s blocks.
ModelConfig config_of_blocks(const std::string& block) {
  ModelConfig c;
  c.vocab_size = 16;
  c.vocab_pad_multiple = 16;
  c.seq_len = 4;
  c.n_layer = 2;
  c.n_head = 1;
  c.d_model = 8;
  c.block = block;
  return c;
}

TEST(LayerRegistry, BuiltInTransformerBlockIsRegistered) {
  EXPECT_TRUE(LayerRegistry::instance().has("transformer"));
  EXPECT_FALSE(LayerRegistry::instance().has("no-such-block"));
}

TEST(LayerRegistry, AUserBlockIsSelectableByName) {
  LayerRegistry::instance().add("identity_for_test", [](const BlockSpec& spec) {
    return std::make_unique<IdentityBlock>(spec);
  });
  ModelConfig c = config_of_blocks("identity_for_test");
  c.n_layer = 3;
  GptModel model(c);
  std::vector<std::string> names;
  for (Parameter* p : model.parameters()) names.push_back(p->name);
  EXPECT_EQ(names, (std::vector<std::string>{"wte", "wpe", "h.0.gain", "h.1.gain", "h.2.gain",
                                             "ln_f.weight", "ln_f.bias"}));
  EXPECT_NE(LayerRegistry::instance().names().find("identity_for_test"), std::string::npos);
}

// Under the library's name a user's block would be saved, exported and sampled as ours.
TEST(LayerRegistry, TheBuiltInNameIsNotReplaced) {
  try {
    LayerRegistry::instance().add("transformer", [](const BlockSpec&) { return nullptr; });
    ADD_FAILURE() << "the built-in block was replaced";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "block type 'transformer' is the library's own: register yours under another name");
  }
  EXPECT_TRUE(LayerRegistry::instance().is_built_in("transformer"));
}

TEST(LayerRegistry, UnknownTypeIsAConfigError) {
  ModelConfig c;
  c.block = "no-such-block";
  EXPECT_THROW(GptModel model(c), ConfigError);
}

// The ConfigError building a model of `block`'s blocks throws ("" where none, "other" where
// another exception).
std::string build_error(const std::string& block) {
  try {
    GptModel model(config_of_blocks(block));
  } catch (const ConfigError& e) {
    return e.what();
  } catch (...) {
    return "other";
  }
  return "";
}

// A user's factory that fails is named by its block type, as a user error: no crash, no
// "internal error".
TEST(LayerRegistry, AFactorysFailureNamesItsBlockType) {
  LayerRegistry& registry = LayerRegistry::instance();
  registry.add("null_for_test", [](const BlockSpec&) { return std::unique_ptr<Layer>(); });
  EXPECT_EQ(build_error("null_for_test"),
            "block type 'null_for_test': its factory returned no layer for block h.0");
  registry.add("throws_for_test", [](const BlockSpec&) -> std::unique_ptr<Layer> {
    throw std::runtime_error("my block needs d_model 64");
  });
  EXPECT_EQ(build_error("throws_for_test"),
            "block type 'throws_for_test' could not build block h.0: my block needs d_model 64");
  registry.add("checks_for_test", [](const BlockSpec& spec) -> std::unique_ptr<Layer> {
    TN_CHECK(spec.config.d_model == 64, "d_model ", spec.config.d_model);
    return nullptr;
  });
  EXPECT_NE(build_error("checks_for_test").find("block type 'checks_for_test' could not build "
                                                "block h.0: "),
            std::string::npos);
  // A user error stands as the factory wrote it.
  registry.add("refuses_for_test", [](const BlockSpec&) -> std::unique_ptr<Layer> {
    TN_THROW(ConfigError, "model.d_model: my block needs 64");
  });
  EXPECT_EQ(build_error("refuses_for_test"), "model.d_model: my block needs 64");
}

// Each block names its parameters under its BlockSpec::name; one fixed name in every block
// (or in the one block of each pipeline stage) would train and save, then fail to load. It is
// refused when the model is built.
TEST(LayerRegistry, AParameterNamedTwiceIsRefused) {
  LayerRegistry::instance().add("fixed_name_for_test", [](const BlockSpec& spec) {
    return std::make_unique<IdentityBlock>(BlockSpec{"blk", spec.index, spec.config, spec.tp});
  });
  EXPECT_EQ(build_error("fixed_name_for_test"),
            "block type 'fixed_name_for_test' names parameter 'blk.gain' of block h.0: name each "
            "block's parameters under its BlockSpec::name ('h.0.*')");
  // One block a pipeline stage: the prefix is what keeps the stages' names apart.
  ModelConfig one_block = config_of_blocks("fixed_name_for_test");
  EXPECT_THROW(GptModel(one_block, {}, ModelChunk{1, 2, false, true}), ConfigError);
}

}  // namespace
}  // namespace ternion
