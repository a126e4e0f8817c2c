#include "training/train_config.h"

#include <gtest/gtest.h>

#include <sstream>

#include "kernels/linear.h"

namespace ternion {
namespace {

constexpr const char* kValid =
    "model:\n"
    "  seq_len: 16\n"
    "  n_layer: 2\n"
    "  n_head: 2\n"
    "  d_model: 16\n"
    "parallel:\n"
    "  micro_batch_size: 2\n"
    "training:\n"
    "  steps: 3\n"
    "  global_batch_size: 4\n"
    "data:\n"
    "  train: train.bin\n";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    TrainConfig::parse(yaml, "run.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The error kValid with `overrides` gives on `world` ranks, or "".
std::string error_on(const std::vector<std::string>& overrides, std::int64_t world) {
  try {
    TrainConfig::parse(kValid, "run.yaml", overrides, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainConfig, ValidConfigReadsAndDerivesMicroBatches) {
  TrainConfig c = TrainConfig::parse(kValid, "run.yaml", {"training.steps=5"});
  EXPECT_EQ(c.model.seq_len, 16);
  EXPECT_EQ(c.training.steps, 5);
  EXPECT_EQ(c.micro_batches_per_step(), 2);
  EXPECT_EQ(c.model.padded_vocab_size(), 256);
  EXPECT_EQ(c.model.ff_width(), 64);
}

TEST(TrainConfig, HeadsMustDivideWidthNamingTheKeyAndLine) {
  std::string msg = error_of(std::string(kValid) + "", {"model.n_head=3"});
  EXPECT_NE(msg.find("--set model.n_head=3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not divide model.d_model (16)"), std::string::npos) << msg;
  std::string yaml = kValid;
  yaml.replace(yaml.find("n_head: 2"), 9, "n_head: 5");
  msg = error_of(yaml);
  EXPECT_NE(msg.find("run.yaml:4: model.n_head"), std::string::npos) << msg;
}

TEST(TrainConfig, ImpossibleValuesAreRefusedByKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"training.global_batch_size=5", "training.global_batch_size"},
      {"training.steps=0", "training.steps"},
      {"model.dropout=1.5", "model.dropout"},
      {"model.dropout=0.000001", "at least 1/65536"},  // below the keep test's resolution
      {"model.vocab_size=0", "model.vocab_size"},
      {"optimizer.type=adam", "optimizer.type"},
      {"optimizer.lr=-1", "optimizer.lr"},
      {"optimizer.decay=step", "optimizer.decay"},
      {"optimizer.warmup_steps=10", "optimizer.warmup_steps"},
      {"training.eval_interval=2", "training.eval_interval"},  // no data.val
      {"data.train=", "data.train"},
      {"parallel.tensor=2", "parallel.tensor"},
      {"parallel.micro_batch_size=0", "parallel.micro_batch_size"},
      {"model.block=mamba", "model.block"},
      // Sizes the kernels cannot index, and models no machine holds (each used to crash).
      {"model.d_ff=4611686018427387904", "model.d_ff"},
      {"model.d_ff=9223372036854775807", "model.d_ff"},
      {"model.vocab_size=9223372036854775807", "model.vocab_size"},
      {"model.vocab_pad_multiple=9223372036854775807", "model.vocab_pad_multiple"},
      {"model.d_model=1073741824", "model.d_model"},
      {"model.d_model=1048576", "model.d_model: 2 layers of width 1048576"},  // 26 trillion
      {"optimizer.lr=.inf", "optimizer.lr"},
      {"optimizer.eps=.inf", "optimizer.eps"},
      {"model.init_std=.nan", "model.init_std"},
      // A prompt byte the model has no token for ('h' of the default "The " is 104).
      {"model.vocab_size=100", "training.sample_prompt"},
  };
  for (const auto& [override_text, key] : cases) {
    std::string msg = error_of(kValid, {override_text});
    EXPECT_NE(msg.find(key), std::string::npos) << override_text << " gave: '" << msg << "'";
  }
  // A model too large is named after what makes most of it: here the layers.
  const std::string layers = error_of(kValid, {"model.n_layer=2147483647", "model.d_ff=4096"});
  EXPECT_NE(layers.find("model.n_layer: 2147483647 layers of width"), std::string::npos) << layers;
}

// parallel.schedule: the names, and zb-h1's limits (one chunk per rank, enough micro-batches)
// named with their keys; on one stage it is accepted (the trainer says it equals 1f1b).
TEST(TrainConfig, PipelineScheduleChoices) {
  const std::string n_layer_4 = "model.n_layer=4";
  for (const char* name : {"1f1b", "gpipe", "zb-h1"}) {
    EXPECT_EQ(error_on({std::string("parallel.schedule=") + name}, 1), "") << name;
    EXPECT_EQ(error_on({std::string("parallel.schedule=") + name, "parallel.pipeline=2"}, 2), "")
        << name;
  }
  EXPECT_NE(error_on({"parallel.schedule=zb-h2"}, 1)
                .find("parallel.schedule: must be 1f1b, gpipe or zb-h1, got 'zb-h2'"),
            std::string::npos);
  const std::string interleaved = error_on(
      {"parallel.schedule=zb-h1", "parallel.pipeline=2", "parallel.virtual_stages=2", n_layer_4},
      2);
  EXPECT_NE(interleaved.find("parallel.virtual_stages: interleaving (virtual_stages > 1) runs the "
                             "interleaved 1F1B schedule, not zb-h1"),
            std::string::npos)
      << interleaved;
  // Two micro-batches (global batch 4 of 2) on four stages.
  const std::string few =
      error_on({"parallel.schedule=zb-h1", "parallel.pipeline=4", n_layer_4}, 4);
  EXPECT_NE(few.find("the zb-h1 schedule needs at least as many micro-batches as pipeline stages "
                     "(4) to defer its weight gradients into, got 2"),
            std::string::npos)
      << few;
}

// A pipeline rank's micro-batches x chunks in a step or an evaluation stay within MPI's tags:
// the key that makes too many is named, and evaluation counts only where it runs, each of its
// batches split as a step's is.
TEST(TrainConfig, PipelineMicroBatchesFitMpisTags) {
  const std::vector<std::string> pp2 = {"model.n_layer=4", "parallel.pipeline=2"};
  auto with = [&pp2](std::vector<std::string> more) {
    more.insert(more.begin(), pp2.begin(), pp2.end());
    return more;
  };
  EXPECT_EQ(error_on(with({"parallel.virtual_stages=2", "training.global_batch_size=16380"}), 2),
            "");
  const std::string step =
      error_on(with({"parallel.virtual_stages=2", "training.global_batch_size=16384"}), 2);
  EXPECT_NE(step.find("training.global_batch_size: makes 8192 micro-batches per step on each "
                      "data-parallel rank (global_batch_size / (micro_batch_size x data)); with "
                      "parallel.virtual_stages 2, MPI's message tags allow at most 8191"),
            std::string::npos)
      << step;
  EXPECT_EQ(error_on(with({"training.eval_batches=20000"}), 2), "");  // never evaluates
  // A step of 4 sequences is 2 micro-batches of 2.
  const std::vector<std::string> eval = {"training.eval_batches=8192", "training.eval_interval=1",
                                         "data.val=val.bin"};
  const std::string evaluated = error_on(with(eval), 2);
  EXPECT_NE(evaluated.find("training.eval_batches: makes 8192 x 2 micro-batches per evaluation "
                           "on each data-parallel rank; with parallel.virtual_stages 1, MPI's "
                           "message tags allow at most 16383"),
            std::string::npos)
      << evaluated;
  EXPECT_EQ(error_on(with({"training.eval_batches=8191", "training.eval_interval=1",
                           "data.val=val.bin"}), 2),
            "");
  std::vector<std::string> shared = with(eval);
  shared.push_back("parallel.data=2");
  EXPECT_EQ(error_on(shared, 4), "");  // 8192 x 1 on each of the two replicas
}

// training.attention: the three names, and cudnn only where cuDNN's fused attention can run.
TEST(TrainConfig, AttentionKernelChoices) {
  for (const char* name : {"auto", "cublas"})
    EXPECT_EQ(error_of(kValid, {std::string("training.attention=") + name}), "") << name;
  EXPECT_EQ(error_of(kValid, {"training.attention=cudnn", "training.device=cuda",
                              "training.precision=bf16"}),
            "");
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"training.attention=flash"}, "must be auto, cudnn or cublas, got 'flash'"},
      {{"training.attention=cudnn", "training.precision=bf16"}, "needs training.device: cuda"},
      {{"training.attention=cudnn", "training.device=cuda"}, "needs training.precision: bf16"},
  };
  for (const auto& [overrides, want] : refused) {
    const std::string msg = error_of(kValid, overrides);
    EXPECT_NE(msg.find("training.attention"), std::string::npos) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  }
}

// training.gelu_epilogue: check, on or off.
TEST(TrainConfig, GeluEpilogueChoices) {
  for (const char* name : {"check", "on", "off"})
    EXPECT_EQ(error_of(kValid, {std::string("training.gelu_epilogue=") + name}), "") << name;
  const std::string msg = error_of(kValid, {"training.gelu_epilogue=fast"});
  EXPECT_NE(msg.find("training.gelu_epilogue"), std::string::npos) << msg;
  EXPECT_NE(msg.find("must be check, on or off, got 'fast'"), std::string::npos) << msg;
  GeluEpilogue policy = GeluEpilogue::off;
  ASSERT_TRUE(parse_gelu_epilogue("on", policy));
  EXPECT_EQ(policy, GeluEpilogue::on);
  EXPECT_FALSE(parse_gelu_epilogue("ON", policy));
}

TEST(TrainConfig, UnknownKeysAndWrongTypes) {
  std::string msg = error_of(std::string(kValid) + "logging:\n  metric_file: x\n");
  EXPECT_NE(msg.find("run.yaml:14"), std::string::npos) << msg;
  EXPECT_NE(msg.find("logging.metric_file"), std::string::npos) << msg;
  msg = error_of(kValid, {"training.steps=ten"});
  EXPECT_NE(msg.find("training.steps: expected an integer, got 'ten'"), std::string::npos) << msg;
}

TEST(TrainConfig, SchemaPrintsEveryRequiredKey) {
  std::ostringstream out;
  print_config_schema(out);
  const std::string text = out.str();
  for (const char* key :
       {"vocab_size:", "seq_len:", "n_layer:", "n_head:", "d_model:", "d_ff:", "dropout:",
        "tensor:", "pipeline:", "data:", "micro_batch_size:", "steps:", "global_batch_size:",
        "seed:", "eval_interval:", "type:", "lr:", "min_lr:", "warmup_steps:", "weight_decay:",
        "grad_clip:", "train:", "val:", "metrics_file:"})
    EXPECT_NE(text.find(key), std::string::npos) << key;
}

TEST(TrainConfig, MissingFileNamesIt) {
  try {
    TrainConfig::load("/no/such/config.yaml", {});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/config.yaml"), std::string::npos);
  }
}

}  // namespace
}  // namespace ternion
