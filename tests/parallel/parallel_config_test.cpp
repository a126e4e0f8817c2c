// ParallelConfig's checks of a layout against the world size and the model, each naming the
// key to change and where its value came from.
#include "parallel/parallel_config.h"

#include <gtest/gtest.h>

#include <string>

#include "layers/model_facts.h"

namespace ternion {
namespace {

constexpr const char* kYaml =
    "model:\n"
    "  n_head: 4\n"
    "  d_model: 32\n"
    "parallel:\n"
    "  tensor: 2\n"
    "  pipeline: 2\n"
    "  data: 2\n";

struct Read {
  ConfigDocument doc;
  ParallelConfig parallel;
  ModelConfig model;
};

Read read(const std::vector<std::string>& overrides) {
  Read r{ConfigDocument::parse(kYaml, "run.yaml"), {}, {}};
  for (const std::string& o : overrides) r.doc.apply_override(o);
  read_config_section(r.doc, "parallel", r.parallel);
  read_config_section(r.doc, "model", r.model);
  return r;
}

std::string validate_error(std::int64_t world, const std::vector<std::string>& overrides = {}) {
  Read r = read(overrides);
  try {
    r.parallel.validate(r.doc, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string fit_error(const std::vector<std::string>& overrides) {
  Read r = read(overrides);
  try {
    r.parallel.validate_model_fit(r.doc, model_sharding_shape(r.model));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string trainable_error(std::int64_t world, const std::vector<std::string>& overrides) {
  Read r = read(overrides);
  try {
    r.parallel.validate(r.doc, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ParallelConfig, LayoutMustMatchTheWorldSize) {
  EXPECT_EQ(validate_error(8), "");
  EXPECT_EQ(validate_error(6),
            "run.yaml:6: parallel.pipeline: world size 6 is not parallel.tensor (2) x "
            "parallel.pipeline (2) x parallel.data (2) = 8");
  EXPECT_EQ(validate_error(16),
            "run.yaml:7: parallel.data: world size 16 is not parallel.tensor (2) x "
            "parallel.pipeline (2) x parallel.data (2) = 8; set parallel.data: 4 (or 0 to derive "
            "it from the world size)");
  EXPECT_EQ(validate_error(3, {"parallel.pipeline=1", "parallel.data=1"}),
            "run.yaml:5: parallel.tensor: world size 3 is not parallel.tensor (2) x "
            "parallel.pipeline (1) x parallel.data (1) = 2");
  EXPECT_EQ(validate_error(12, {"parallel.data=0"}), "");
  const std::string derived = validate_error(6, {"parallel.data=0"});
  EXPECT_NE(derived.find("parallel.pipeline: world size 6 is not a multiple of parallel.tensor "
                         "(2) x parallel.pipeline (2) = 4, so parallel.data = 0 cannot derive"),
            std::string::npos)
      << derived;
  EXPECT_NE(validate_error(8, {"parallel.tensor=0"})
                .find("--set parallel.tensor=0: parallel.tensor: "
                      "must be at least 1"),
            std::string::npos);
  EXPECT_NE(validate_error(8, {"parallel.data=-1"}).find("parallel.data: must be at least 1"),
            std::string::npos);
}

TEST(ParallelConfig, ModelMustShardOverTheLayout) {
  EXPECT_EQ(fit_error({}), "");
  EXPECT_EQ(fit_error({"model.n_head=2", "model.d_model=6", "parallel.tensor=4"}),
            "--set model.n_head=2: model.n_head: n_head (2) is not a multiple of parallel.tensor "
            "(4): each tensor-parallel rank takes whole attention heads");
  EXPECT_EQ(
      fit_error({"model.d_ff=102", "parallel.tensor=4", "parallel.pipeline=1"}),
      "--set model.d_ff=102: model.d_ff: the MLP width (102) is not a multiple of "
      "parallel.tensor (4): its hidden units are split evenly over the tensor-parallel ranks");
  EXPECT_EQ(fit_error({"model.n_head=6", "model.d_model=48", "parallel.tensor=3"}),
            "run.yaml (default): model.vocab_pad_multiple: the padded vocabulary (model.vocab_size "
            "256 rounded up to a multiple of 64 = 256) is not a multiple of parallel.tensor (3); "
            "set model.vocab_pad_multiple: 192 (the least common multiple of 64 and 3)");
  EXPECT_EQ(fit_error({"model.n_layer=3", "parallel.pipeline=4"}),
            "--set parallel.pipeline=4: parallel.pipeline: 4 pipeline stages need at least 4 "
            "blocks, but model.n_layer is 3");
  EXPECT_EQ(fit_error({"model.n_layer=4", "parallel.pipeline=4"}), "");
}

TEST(ParallelConfig, EveryLayoutTrainsAndTheDataParallelOptionsAreChecked) {
  EXPECT_EQ(trainable_error(8, {}), "");  // tp 2 x pp 2 x dp 2
  EXPECT_EQ(trainable_error(4, {"parallel.tensor=1", "parallel.pipeline=1", "parallel.data=0"}),
            "");
  EXPECT_EQ(trainable_error(8, {"parallel.zero_stage=2"}), "");
  EXPECT_EQ(trainable_error(8, {"parallel.zero_stage=3"}),
            "--set parallel.zero_stage=3: parallel.zero_stage: must be 0, 1 or 2, got 3");
  EXPECT_EQ(trainable_error(8, {"parallel.zero_stage=2", "parallel.overlap_grad_reduce=false"}),
            "--set parallel.overlap_grad_reduce=false: parallel.overlap_grad_reduce: must be true "
            "with zero_stage 2: ZeRO-2 reduces each bucket as the backward finishes it, which is "
            "what keeps its gradient memory at a shard");
  EXPECT_EQ(trainable_error(8, {"parallel.bucket_size_mb=0"}),
            "--set parallel.bucket_size_mb=0: parallel.bucket_size_mb: must be positive");
}

}  // namespace
}  // namespace ternion
