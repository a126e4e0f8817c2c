// Activation recomputation changes what is kept, not what is computed: selective and full
// (all blocks, and the first of each chunk) train both families with dropout on exactly as
// without recomputation, bit for bit on one rank, and keep less memory doing it.
#include <gtest/gtest.h>

#include <map>

#include "training/trainer.h"
#include "training_test_support.h"

namespace ternion {
namespace {

using testing_support::ScratchDir;

TrainConfig run_config(const ScratchDir& dir, const std::string& family) {
  TrainConfig c;
  c.model.family = family;
  c.model.seq_len = 32;
  c.model.n_layer = 3;
  c.model.n_head = 4;
  if (family == "llama") c.model.n_kv_head = 2;
  c.model.d_model = 32;
  c.model.dropout = 0.1;  // the masks of a recomputed forward must be the masks of the first
  c.parallel.micro_batch_size = 4;
  c.training.steps = 20;
  c.training.global_batch_size = 8;
  c.optimizer.lr = 3e-3;
  c.optimizer.warmup_steps = 2;
  c.data.train = dir.file("train.bin");
  return c;
}

struct TrainedRun {
  std::vector<double> losses, grad_norms;
  std::map<std::string, std::vector<float>> params;
  double activation_mb = 0.0;  // the largest step's
};

TrainedRun train(TrainConfig c, const std::string& mode, std::int64_t layers = 0) {
  c.training.recompute = mode;
  c.training.recompute_layers = layers;
  Trainer trainer(c);
  TrainedRun run;
  for (std::int64_t step = 1; step <= c.training.steps; ++step) {
    const StepMetrics m = trainer.train_step(step);
    run.losses.push_back(m.loss);
    run.grad_norms.push_back(m.grad_norm);
    run.activation_mb = std::max(run.activation_mb, m.activation_mb);
  }
  for (const Parameter* p : trainer.parameters()) run.params[p->name] = p->value.to_vector();
  return run;
}

class Recompute : public ::testing::TestWithParam<std::string> {};

TEST_P(Recompute, EveryModeTrainsBitForBitAsNone) {
  ScratchDir dir("recompute-" + GetParam());
  testing_support::prepare_builtin(dir, 50000);
  const TrainConfig c = run_config(dir, GetParam());
  const TrainedRun none = train(c, "none");
  for (const auto& [mode, layers] : std::vector<std::pair<std::string, std::int64_t>>{
           {"selective", 0}, {"full", 0}, {"full", 1}}) {
    const TrainedRun other = train(c, mode, layers);
    const std::string label = mode + " (recompute_layers " + std::to_string(layers) + ")";
    EXPECT_EQ(other.losses, none.losses) << label;
    EXPECT_EQ(other.grad_norms, none.grad_norms) << label;
    EXPECT_EQ(other.params, none.params) << label;
    // What it keeps: less, and full keeps less than selective.
    EXPECT_LT(other.activation_mb, none.activation_mb) << label;
  }
  EXPECT_LT(train(c, "full").activation_mb, train(c, "selective").activation_mb);
}

INSTANTIATE_TEST_SUITE_P(Families, Recompute, ::testing::Values("gpt2", "llama"));

}  // namespace
}  // namespace ternion
