// parameters_on_rank against the real model (tp = pp = 1) and against closed forms of the
// sharding: a pipeline group holds the model once plus the last stage's copy of the tied
// embedding; a tensor group holds it once plus (tp - 1) extra copies of what is replicated.
#include "layers/model_facts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/gpt_model.h"
#include "layers/layer_registry.h"
#include "layers/mlp.h"

namespace ternion {
namespace {

ModelConfig model(std::int64_t n_layer, std::int64_t n_head, std::int64_t d_model,
                  std::int64_t d_ff = 0, std::int64_t vocab = 256, std::int64_t pad = 64) {
  ModelConfig c;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.d_model = d_model;
  c.d_ff = d_ff;
  c.vocab_size = vocab;
  c.vocab_pad_multiple = pad;
  c.seq_len = 24;
  return c;
}

std::string label(const ModelConfig& c) {
  return "n_layer " + std::to_string(c.n_layer) + " n_head " + std::to_string(c.n_head) +
         " d_model " + std::to_string(c.d_model) + " d_ff " + std::to_string(c.ff_width()) +
         " vocab " + std::to_string(c.padded_vocab_size());
}

const std::vector<ModelConfig>& models() {
  static const std::vector<ModelConfig> all = {model(1, 1, 8),
                                               model(2, 2, 16),
                                               model(4, 4, 32, 48),
                                               model(5, 2, 24, 0, 300, 8),
                                               model(7, 4, 16, 64, 65, 16),
                                               model(8, 8, 64, 0, 1000, 128)};
  return all;
}

std::int64_t sum_over(const ModelConfig& c, const RankLayout& layout,
                      const std::vector<int>& ranks) {
  std::int64_t sum = 0;
  for (int r : ranks) sum += parameters_on_rank(c, layout, r);
  return sum;
}

// What every tensor-parallel rank holds in full: LayerNorms, row-parallel biases, wpe.
std::int64_t replicated(const ModelConfig& c) {
  return c.n_layer * (4 * c.d_model + 2 * c.d_model) + 2 * c.d_model + c.seq_len * c.d_model;
}

TEST(ParameterCount, OneRankCountsTheRealModel) {
  for (const ModelConfig& c : models()) {
    const std::int64_t real = count_elements(GptModel(c).parameters());
    const std::int64_t counted = parameters_on_rank(c, make_rank_layout(1, 1, 1, 1), 0);
    EXPECT_EQ(counted, real) << label(c) << ": difference " << counted - real;
  }
}

TEST(ParameterCount, PipelineGroupHoldsTheModelPlusTheTiedCopy) {
  for (const ModelConfig& c : models()) {
    const std::int64_t total = parameters_on_rank(c, make_rank_layout(1, 1, 1, 1), 0);
    const std::int64_t wte = c.padded_vocab_size() * c.d_model;
    for (std::int64_t pp = 2; pp <= std::min<std::int64_t>(c.n_layer, 4); ++pp) {
      const RankLayout layout = make_rank_layout(pp * 2, 1, pp, 2);
      for (const std::vector<int>& group : layout.pp_groups) {
        const std::int64_t sum = sum_over(c, layout, group);
        EXPECT_EQ(sum, total + wte) << label(c) << " pp " << pp << " group " << rank_list_str(group)
                                    << ": difference " << sum - total - wte;
      }
    }
  }
}

TEST(ParameterCount, TensorGroupShardsAllButTheReplicatedParts) {
  for (const ModelConfig& c : models()) {
    const std::int64_t total = parameters_on_rank(c, make_rank_layout(1, 1, 1, 1), 0);
    for (std::int64_t tp : {2, 4, 8}) {
      if (c.n_head % tp != 0 || c.ff_width() % tp != 0 || c.padded_vocab_size() % tp != 0) continue;
      const RankLayout layout = make_rank_layout(tp, tp, 1, 1);
      const std::int64_t want = total + (tp - 1) * replicated(c);
      const std::int64_t sum = sum_over(c, layout, layout.tp_group(0));
      EXPECT_EQ(sum, want) << label(c) << " tp " << tp << ": difference " << sum - want;
      for (int r = 1; r < tp; ++r)  // the shards are the same size
        EXPECT_EQ(parameters_on_rank(c, layout, r), parameters_on_rank(c, layout, 0)) << label(c);
    }
  }
}

TEST(ParameterCount, ModelParallelGroupOfTensorAndPipeline) {
  const ModelConfig c = model(5, 4, 32, 0, 256, 64);
  const std::int64_t total = parameters_on_rank(c, make_rank_layout(1, 1, 1, 1), 0);
  const RankLayout layout = make_rank_layout(24, 2, 3, 4);
  const std::int64_t want = total + replicated(c) + c.padded_vocab_size() * c.d_model;
  for (const std::vector<int>& group : layout.mp_groups) {
    const std::int64_t sum = sum_over(c, layout, group);
    EXPECT_EQ(sum, want) << rank_list_str(group) << ": difference " << sum - want;
  }
  for (const std::vector<int>& group : layout.dp_groups)  // data-parallel ranks are replicas
    for (int r : group)
      EXPECT_EQ(parameters_on_rank(c, layout, r), parameters_on_rank(c, layout, group.front()));
  // Stage 0 of 3 holds blocks 0-1 and the embeddings, stage 2 block 4, ln_f and the wte copy.
  const std::int64_t block = 4 * 32 + (3 * 32 * 32 + 3 * 32) / 2 + (32 * 32 / 2 + 32) +
                             (128 * 32 + 128) / 2 + (32 * 128 / 2 + 32);
  const std::int64_t wte_shard = 256 / 2 * 32;
  EXPECT_EQ(parameters_on_rank(c, layout, 0), 2 * block + wte_shard + 24 * 32);
  EXPECT_EQ(parameters_on_rank(c, layout, 8), 2 * block);
  EXPECT_EQ(parameters_on_rank(c, layout, 16), 1 * block + 2 * 32 + wte_shard);
}

TEST(ParameterCount, StagesTakeBlocksEvenlyFirstStagesOneMore) {
  const std::vector<std::int64_t> sizes = {3, 3, 2, 2};
  std::int64_t next = 0;
  for (std::int64_t s = 0; s < 4; ++s) {
    const StageBlocks blocks = pipeline_stage_blocks(10, 4, s);
    EXPECT_EQ(blocks.begin, next) << "stage " << s;
    EXPECT_EQ(blocks.size(), sizes[static_cast<std::size_t>(s)]) << "stage " << s;
    next = blocks.end;
  }
  EXPECT_EQ(next, 10);
  EXPECT_EQ(pipeline_stage_blocks(4, 4, 3).size(), 1);
  EXPECT_EQ(pipeline_stage_blocks(4, 1, 0).size(), 4);
}

// A registered block's sharding is its own: a block that is one tensor-parallel MLP is counted
// from what it builds on each tensor rank (column-parallel fc and its bias split, row-parallel
// proj split with its bias whole), not refused.
class MlpOnlyBlock : public Layer {
 public:
  explicit MlpOnlyBlock(const BlockSpec& spec)
      : Layer(spec.name), mlp_(spec.name + ".mlp", spec.config, spec.tp) {}
  Tensor forward(const Tensor& input, ActivationContext& ctx) override {
    return mlp_.forward(input, ctx);
  }
  Tensor backward(const Tensor& grad_output, ActivationContext& ctx) override {
    return mlp_.backward(grad_output, ctx);
  }
  void collect_parameters(std::vector<Parameter*>& out) override { mlp_.collect_parameters(out); }

 private:
  Mlp mlp_;
};

TEST(ParameterCount, RegisteredBlocksAreCountedAsBuiltOnEachRank) {
  LayerRegistry::instance().add("mlp_only", [](const BlockSpec& spec) {
    return std::make_unique<MlpOnlyBlock>(spec);
  });
  ModelConfig c = model(3, 4, 32, 64);
  c.block = "mlp_only";
  const std::int64_t C = 32, ff = 64, V = 256, T = 24;
  const std::int64_t whole_block = ff * C + ff + C * ff + C;
  EXPECT_EQ(parameters_on_rank(c, make_rank_layout(1, 1, 1, 1), 0),
            V * C + T * C + 3 * whole_block + 2 * C);
  // Tensor 2 x pipeline 2: blocks 0-1 with the embeddings, block 2 with ln_f and wte's copy.
  const RankLayout layout = make_rank_layout(4, 2, 2, 1);
  const std::int64_t block = (ff * C + ff) / 2 + C * ff / 2 + C;
  for (int tp_rank : {0, 1}) {
    EXPECT_EQ(parameters_on_rank(c, layout, layout.global_rank({tp_rank, 0, 0})),
              2 * block + V / 2 * C + T * C);
    EXPECT_EQ(parameters_on_rank(c, layout, layout.global_rank({tp_rank, 0, 1})),
              block + 2 * C + V / 2 * C);
  }
}

// The counts come from a build that holds no memory: every parameter is a shape.
TEST(ShapeOnlyParameters, BuildsTheModelWithoutItsData) {
  const ModelConfig c = model(2, 2, 16);
  std::int64_t shapes = 0;
  {
    const ShapeOnlyParameters shapes_only;
    GptModel model(c);
    for (const Parameter* p : model.parameters()) {
      EXPECT_FALSE(p->value.has_data()) << p->name;
      EXPECT_FALSE(p->grad.has_data()) << p->name;
      shapes += p->value.numel();
    }
    EXPECT_THROW(model.initialize(1), Error);  // nothing to write to
  }
  GptModel real(c);  // the scope is over: memory again
  for (const Parameter* p : real.parameters()) EXPECT_TRUE(p->value.has_data()) << p->name;
  EXPECT_EQ(shapes, count_elements(real.parameters()));
}

}  // namespace
}  // namespace ternion

namespace ternion {
namespace {

// Interleaving: rank s holds virtual stages s, pp + s, ...; the pipeline group still sums to
// the whole model plus the LM head's copy of wte.
TEST(ParameterCount, InterleavedChunksSumToTheModel) {
  ModelConfig c;
  c.n_layer = 8;
  c.n_head = 4;
  c.d_model = 32;
  const std::int64_t total = parameters_on_rank(c, make_rank_layout(1, 1, 1, 1), 0);
  const RankLayout layout = make_rank_layout(2, 1, 2, 1);
  const std::int64_t sum =
      parameters_on_rank(c, layout, 0, 2) + parameters_on_rank(c, layout, 1, 2);
  EXPECT_EQ(sum, total + c.padded_vocab_size() * c.d_model);
  // 8 blocks over 4 virtual stages: each rank holds 4 blocks, as without interleaving here.
  EXPECT_EQ(parameters_on_rank(c, layout, 0, 2), parameters_on_rank(c, layout, 0, 1));
}

}  // namespace
}  // namespace ternion

namespace ternion {
namespace {

// FLOPs per token, from the built layers, against the closed forms (Megatron's and llm.c's
// counting): 2 per weight element of each GEMM, causal attention over seq_len / 2 keys per
// query for QK^T and PV, the head's GEMM over the padded vocabulary; lookups and norms free.
TEST(ForwardFlops, BuiltLayersSumToTheClosedForms) {
  const double d = 32, ff = 96, T = 24, V = 320, L = 3;
  ModelConfig gpt2 = model(3, 4, 32, 96, 300, 64);
  const double attention = 2.0 * 2.0 * d * T / 2.0;
  EXPECT_DOUBLE_EQ(forward_flops_per_token(gpt2),
                   L * (2.0 * (4 * d * d + 2 * d * ff) + attention) + 2.0 * d * V);
  ModelConfig llama = gpt2;
  llama.family = "llama";
  llama.n_kv_head = 2;  // head size 8: key/value width 16
  const double kv = 16;
  EXPECT_DOUBLE_EQ(forward_flops_per_token(llama),
                   L * (2.0 * ((d + 2 * kv) * d + d * d + 3 * d * ff) + attention) + 2.0 * d * V);
}

}  // namespace
}  // namespace ternion
