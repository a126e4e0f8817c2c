// A split backward (the zero-bubble schedule's B then W, layers/layer.h) against the plain
// one, layer by layer and for whole models of both families, pipeline chunks and every
// recomputation mode: the input gradient and every parameter gradient must be equal bit for
// bit, and before W runs no parameter gradient may have been touched (else W deferred
// nothing). The model's gradient-ready hooks must fire in W, for the same layers in the same
// order as in a plain backward.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/philox.h"
#include "layers/embedding.h"
#include "layers/gpt_model.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/lm_head.h"
#include "layers/rms_norm.h"

namespace ternion {
namespace {

Tensor random_tensor(const Shape& shape, std::uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = philox_normal({seed, 7}, static_cast<std::uint64_t>(i));
  return t;
}

Tensor random_tokens(const Shape& shape, std::int64_t vocab, std::uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::I32);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<std::int32_t>()[i] = static_cast<std::int32_t>(
        philox_bits({seed, 3}, static_cast<std::uint64_t>(i)).v[0] % vocab);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.shape() == y.shape() && std::memcmp(x.data<float>(), y.data<float>(), x.nbytes()) == 0;
}

bool all_zero(const Tensor& t) {
  for (float v : t.to_vector())
    if (v != 0.0f) return false;
  return true;
}

MicroBatchInfo training_info() {
  MicroBatchInfo info;
  info.step = 3;
  info.seed = 11;
  info.training = true;
  return info;
}

// Something with parameters whose backward can run plain or split: `run` does its forward
// and backward in `ctx` and returns the input's gradient (undefined where there is none).
struct Subject {
  std::vector<Parameter*> params;
  std::function<Tensor(ActivationContext&)> run;
  std::shared_ptr<void> owner;
};

// Builds the subject twice (identically), runs it plain and split, and compares.
void expect_split_equals_plain(const std::string& what, const std::function<Subject()>& make,
                               const MicroBatchInfo& info = training_info()) {
  Subject plain = make(), split = make();
  for (Subject* s : {&plain, &split})
    for (Parameter* p : s->params) {
      initialize_parameter(*p, 5);
      p->grad.zero();
    }
  ActivationContext plain_ctx(info);
  const Tensor plain_dx = plain.run(plain_ctx);
  EXPECT_TRUE(plain_ctx.empty()) << what;

  ActivationContext ctx(info);
  ctx.set_defer_weight_gradients(true);
  const Tensor dx = split.run(ctx);
  EXPECT_TRUE(same_bits(dx, plain_dx)) << what << ": input gradient";
  for (Parameter* p : split.params)
    EXPECT_TRUE(all_zero(p->grad)) << what << ": " << p->name << " written before W";
  std::vector<std::function<void()>> weight_work = ctx.take_weight_gradients();
  EXPECT_FALSE(weight_work.empty()) << what << ": nothing deferred";
  EXPECT_TRUE(ctx.empty()) << what;
  for (auto& work : weight_work) work();
  ASSERT_EQ(split.params.size(), plain.params.size());
  for (std::size_t i = 0; i < split.params.size(); ++i) {
    EXPECT_TRUE(same_bits(split.params[i]->grad, plain.params[i]->grad))
        << what << ": " << split.params[i]->name;
    EXPECT_FALSE(all_zero(plain.params[i]->grad)) << what << ": " << plain.params[i]->name;
  }
}

template <class L>
Subject layer_subject(std::shared_ptr<L> layer, Tensor input, Tensor grad) {
  Subject s;
  s.params = layer->parameters();
  s.run = [layer, input, grad](ActivationContext& ctx) {
    layer->forward(input, ctx);
    return layer->backward(grad, ctx);
  };
  s.owner = layer;
  return s;
}

TEST(SplitBackward, Linear) {
  for (LinearActivation act : {LinearActivation::none, LinearActivation::gelu})
    expect_split_equals_plain(act == LinearActivation::gelu ? "linear gelu" : "linear", [&] {
      return layer_subject(std::make_shared<Linear>("fc", 6, 10, true, 0.5f, WeightShard{}, act),
                           random_tensor({2, 3, 6}, 1), random_tensor({2, 3, 10}, 2));
    });
}

TEST(SplitBackward, LinearThroughTheInputsGelu) {
  expect_split_equals_plain("fc gelu -> proj", [] {
    auto fc = std::make_shared<Linear>("fc", 6, 10, true, 0.5f, WeightShard{},
                                       LinearActivation::gelu);
    auto proj = std::make_shared<Linear>("proj", 10, 6, true, 0.5f);
    Subject s;
    s.params = fc->parameters();
    for (Parameter* p : proj->parameters()) s.params.push_back(p);
    const Tensor x = random_tensor({2, 3, 6}, 3), g = random_tensor({2, 3, 6}, 4);
    s.run = [fc, proj, x, g](ActivationContext& ctx) {
      proj->forward(fc->forward(x, ctx), ctx);
      const Tensor dpre = proj->backward(g, ctx, fc->output_gelu(ctx));
      return fc->backward_pre_activation(dpre, ctx);
    };
    s.owner =
        std::make_shared<std::pair<std::shared_ptr<Linear>, std::shared_ptr<Linear>>>(fc, proj);
    return s;
  });
}

TEST(SplitBackward, ColumnAndRowParallelLinear) {
  expect_split_equals_plain("column parallel", [] {
    return layer_subject(std::make_shared<ColumnParallelLinear>("qkv", 6, 12, true, 0.5f,
                                                                TensorParallel{}),
                         random_tensor({2, 3, 6}, 5), random_tensor({2, 3, 12}, 6));
  });
  expect_split_equals_plain("row parallel", [] {
    return layer_subject(std::make_shared<RowParallelLinear>("proj", 12, 6, true, 0.5f,
                                                             TensorParallel{}),
                         random_tensor({2, 3, 12}, 7), random_tensor({2, 3, 6}, 8));
  });
}

TEST(SplitBackward, Norms) {
  expect_split_equals_plain("layer norm", [] {
    return layer_subject(std::make_shared<LayerNorm>("ln", 8), random_tensor({2, 3, 8}, 9),
                         random_tensor({2, 3, 8}, 10));
  });
  expect_split_equals_plain("rms norm", [] {
    return layer_subject(std::make_shared<RmsNorm>("rms", 8, 1e-5f), random_tensor({2, 3, 8}, 11),
                         random_tensor({2, 3, 8}, 12));
  });
  expect_split_equals_plain("layer norm with a residual gradient", [] {
    auto ln = std::make_shared<LayerNorm>("ln", 8);
    Subject s;
    s.params = ln->parameters();
    const Tensor x = random_tensor({2, 3, 8}, 13), g = random_tensor({2, 3, 8}, 14),
                 r = random_tensor({2, 3, 8}, 15);
    s.run = [ln, x, g, r](ActivationContext& ctx) {
      ln->forward(x, ctx);
      return ln->backward(g, ctx, r);
    };
    s.owner = ln;
    return s;
  });
}

ModelConfig tiny_config(const std::string& family) {
  ModelConfig c;
  c.family = family;
  c.vocab_size = 29;
  c.vocab_pad_multiple = 8;
  c.seq_len = 6;
  c.n_layer = 3;
  c.n_head = 4;
  c.d_model = 16;
  c.d_ff = 24;
  c.init_std = 0.2;
  c.dropout = family == "gpt2" ? 0.1 : 0.0;
  if (family == "llama") {
    c.n_kv_head = 2;
    c.tie_embeddings = true;
  }
  return c;
}

TEST(SplitBackward, EmbeddingWithDropout) {
  const ModelConfig config = tiny_config("gpt2");
  expect_split_equals_plain("embedding", [&] {
    return layer_subject(std::make_shared<Embedding>("embed", config),
                         random_tokens({2, 6}, 29, 16), random_tensor({2, 6, 16}, 17));
  });
}

TEST(SplitBackward, LanguageModelHead) {
  const ModelConfig config = tiny_config("gpt2");
  for (const bool weight_at_forward : {false, true}) {
    // Known at forward, the loss weight lets the head compute the logits' gradient there.
    MicroBatchInfo info = training_info();
    if (weight_at_forward) info.loss_weight = 0.1f;
    expect_split_equals_plain(
        weight_at_forward ? "head, loss weight at forward" : "head",
        [&] {
          struct Head {
            Parameter weight =
                make_parameter("head.weight", {32, 16}, ParameterInit::Normal, 0.5f, true);
            std::unique_ptr<LanguageModelHead> head;
          };
          auto h = std::make_shared<Head>();
          h->head = std::make_unique<LanguageModelHead>(
              "head", config, std::make_unique<LayerNorm>("ln_f", 16), h->weight);
          Subject s;
          h->head->collect_parameters(s.params);
          s.params.push_back(&h->weight);
          const Tensor x = random_tensor({2, 6, 16}, 18), targets = random_tokens({2, 6}, 29, 19);
          s.run = [h, x, targets](ActivationContext& ctx) {
            h->head->forward(x, targets, ctx);
            return h->head->backward(0.1f, ctx);
          };
          s.owner = h;
          return s;
        },
        info);
  }
}

// A whole model or one pipeline chunk, plain against split, with the hooks recorded.
struct HookLog {
  std::vector<std::string> events;  // "needed p1 p2 ..." / "ready p1 p2 ..."
};

std::string names_of(const std::vector<Parameter*>& params) {
  std::string out;
  for (const Parameter* p : params) out += " " + p->name;
  return out;
}

void expect_model_split_equals_plain(const std::string& what, const ModelConfig& config,
                                     ModelChunk chunk, RecomputePolicy recompute) {
  auto build = [&](HookLog& log) {
    auto model = std::make_unique<GptModel>(config, TensorParallel{}, chunk);
    model->initialize(9);
    model->zero_grad();
    model->set_recompute(recompute);
    model->set_gradient_ready_hook(
        [&log](const MicroBatchInfo&, const std::vector<Parameter*>& params) {
          log.events.push_back("ready" + names_of(params));
        });
    model->set_gradients_needed_hook([&log](const std::vector<Parameter*>& params) {
      log.events.push_back("needed" + names_of(params));
    });
    return model;
  };
  HookLog plain_log, split_log;
  auto plain = build(plain_log), split = build(split_log);
  const Tensor tokens = random_tokens({2, 6}, 29, 20), targets = random_tokens({2, 6}, 29, 21);
  const Tensor hidden = random_tensor({2, 6, 16}, 22), grad = random_tensor({2, 6, 16}, 23);
  const Tensor& input = chunk.has_embedding ? tokens : hidden;
  const float weight = 1.0f / 12;

  ActivationContext plain_ctx(training_info());
  Tensor losses;
  plain->forward_chunk(input, targets, plain_ctx, &losses);
  const Tensor plain_dx =
      plain->backward_chunk(chunk.has_head ? Tensor() : grad, weight, plain_ctx);
  EXPECT_TRUE(plain_ctx.empty()) << what;

  ActivationContext ctx(training_info());
  split->forward_chunk(input, targets, ctx, &losses);
  const Tensor dx = split->backward_input_chunk(chunk.has_head ? Tensor() : grad, weight, ctx);
  EXPECT_TRUE(same_bits(dx, plain_dx)) << what << ": input gradient";
  EXPECT_TRUE(split_log.events.empty()) << what << ": a hook fired before W";
  for (Parameter* p : split->parameters())
    EXPECT_TRUE(all_zero(p->grad)) << what << ": " << p->name << " written before W";
  split->backward_weight_chunk(ctx);
  EXPECT_TRUE(ctx.empty()) << what;
  EXPECT_EQ(split_log.events, plain_log.events) << what;
  for (std::size_t i = 0; i < split->parameters().size(); ++i)
    EXPECT_TRUE(same_bits(split->parameters()[i]->grad, plain->parameters()[i]->grad))
        << what << ": " << split->parameters()[i]->name;
}

// Two micro-batches as zb-h1 interleaves them (F0 F1 B0 B1 W0 W1) against one after the other
// with plain backwards (F0 B0 F1 B1): the gradients they accumulate, bit for bit. Dropout is
// on (gpt2), so each micro-batch's own masks must reach its deferred work.
TEST(SplitBackward, InterleavedMicroBatchesAccumulateThePlainGradients) {
  for (const std::string family : {"gpt2", "llama"}) {
    const ModelConfig config = tiny_config(family);
    auto build = [&] {
      auto model = std::make_unique<GptModel>(config);
      model->initialize(9);
      model->zero_grad();
      return model;
    };
    auto plain = build(), split = build();
    const Tensor tokens[] = {random_tokens({2, 6}, 29, 30), random_tokens({2, 6}, 29, 31)};
    const Tensor targets[] = {random_tokens({2, 6}, 29, 32), random_tokens({2, 6}, 29, 33)};
    auto info = [](int m) {
      MicroBatchInfo i = training_info();
      i.micro_batch = m;
      i.sample_offset = 2 * m;
      return i;
    };
    const float weight = 1.0f / 24;
    for (int m = 0; m < 2; ++m) {
      ActivationContext ctx(info(m));
      plain->forward(tokens[m], targets[m], ctx);
      plain->backward(weight, ctx);
    }
    ActivationContext c0(info(0)), c1(info(1));
    ActivationContext* ctx[] = {&c0, &c1};
    Tensor losses;
    for (int m = 0; m < 2; ++m) split->forward_chunk(tokens[m], targets[m], *ctx[m], &losses);
    for (int m = 0; m < 2; ++m) split->backward_input_chunk(Tensor(), weight, *ctx[m]);
    for (int m = 0; m < 2; ++m) split->backward_weight_chunk(*ctx[m]);
    for (std::size_t i = 0; i < split->parameters().size(); ++i)
      EXPECT_TRUE(same_bits(split->parameters()[i]->grad, plain->parameters()[i]->grad))
          << family << ": " << split->parameters()[i]->name;
  }
}

TEST(SplitBackward, WholeModelsOfBothFamilies) {
  for (const std::string family : {"gpt2", "llama"})
    for (const Recompute mode : {Recompute::none, Recompute::selective, Recompute::full})
      expect_model_split_equals_plain(
          family + " recompute " + std::to_string(static_cast<int>(mode)), tiny_config(family),
          ModelChunk{}, RecomputePolicy{mode, 0});
}

TEST(SplitBackward, PipelineChunks) {
  for (const std::string family : {"gpt2", "llama"}) {
    const ModelConfig config = tiny_config(family);
    expect_model_split_equals_plain(family + " first chunk", config, ModelChunk{0, 1, true, false},
                                    {});
    expect_model_split_equals_plain(family + " middle chunk", config,
                                    ModelChunk{1, 2, false, false}, {});
    expect_model_split_equals_plain(family + " last chunk", config, ModelChunk{2, 3, false, true},
                                    RecomputePolicy{Recompute::full, 0});
  }
}

}  // namespace
}  // namespace ternion
