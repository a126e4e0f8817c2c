// Tensor parallelism against one rank, under mpirun (2 and 4 ranks): the whole world is one
// tensor-parallel group. Every rank also builds the unsharded reference itself (no
// communication), so each comparison is local: a sharded output or gradient must equal the
// matching slice of the reference's, to fp32 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "data/builtin_corpus.h"
#include "data/text_prepare.h"
#include "framework/philox.h"
#include "layers/gpt_model.h"
#include "layers/linear.h"
#include "layers/transformer_block.h"
#include "mpi_gtest.h"
#include "parallel/process_groups.h"
#include "sharded_compare.h"
#include "test_util.h"
#include "training/trainer.h"

namespace ternion {
namespace {

using test::close_to;
using test::expect_parameters_match;
using test::slice_for;

TensorParallel world_tp(bool sequence_parallel = false) {
  return {&testing_mpi::world(), sequence_parallel};
}

Tensor random_tensor(const Shape& shape, std::uint64_t seed) {
  return Tensor::from_vector(
      test::random_floats(static_cast<std::size_t>(shape_numel(shape)), seed), shape);
}

ModelConfig small_model() {
  ModelConfig c;
  c.vocab_size = 61;
  c.vocab_pad_multiple = 16;  // 64 rows: 16 per rank at tp = 4
  c.seq_len = 8;
  c.n_layer = 2;
  c.n_head = 4;
  c.d_model = 16;
  c.d_ff = 24;
  c.init_std = 0.2;
  return c;
}

// Runs forward and backward of `layer` on `input` with output gradient `grad_out`.
std::pair<Tensor, Tensor> run_layer(Layer& layer, const Tensor& input, const Tensor& grad_out) {
  MicroBatchInfo info;
  info.step = 2;
  info.seed = 9;
  ActivationContext ctx(info);
  Tensor out = layer.forward(input, ctx).contiguous().clone();
  Tensor din = layer.backward(grad_out, ctx);
  return {out, din.defined() ? din.contiguous() : din};
}

void initialize(Layer& layer, std::uint64_t seed) {
  for (Parameter* p : layer.parameters()) initialize_parameter(*p, seed);
}

TEST(TensorParallelMappings, GatherScatterAndReduceAlongDimensions) {
  const TensorParallel tp = world_tp();
  const int n = tp.size(), r = tp.rank();
  // Every rank's piece is known to every rank: rank q holds q * 1000 + i.
  auto piece = [&](int q, const Shape& shape) {
    std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(q * 1000 + i);
    return Tensor::from_vector(v, shape);
  };
  for (std::int64_t dim : {1, 2}) {
    Shape local = {2, 3, 5};
    Tensor gathered = all_gather_along(piece(r, local), dim, tp);
    Shape whole = local;
    whole[dim] *= n;
    ASSERT_EQ(gathered.shape(), whole);
    for (int q = 0; q < n; ++q)
      EXPECT_EQ(gathered.slice(dim, q * local[dim], local[dim]).to_vector(),
                piece(q, local).to_vector())
          << "dim " << dim << " piece " << q;
    // split_along undoes it; reduce_scatter_along sums the ranks' tensors and splits the sum.
    EXPECT_EQ(split_along(gathered, dim, tp).to_vector(), piece(r, local).to_vector());
    Tensor summed_whole = Tensor::zeros(whole);
    std::vector<float> expect(static_cast<std::size_t>(shape_numel(whole)), 0.0f);
    for (int q = 0; q < n; ++q) {
      const std::vector<float> contribution = piece(q, whole).to_vector();
      for (std::size_t i = 0; i < expect.size(); ++i) expect[i] += contribution[i];
    }
    Tensor scattered = reduce_scatter_along(piece(r, whole), dim, tp);
    EXPECT_EQ(
        scattered.to_vector(),
        Tensor::from_vector(expect, whole).slice(dim, r * local[dim], local[dim]).to_vector());
  }
  Tensor x = piece(r, {4});
  all_reduce_in_place(x, tp, ReduceOp::Max);
  EXPECT_EQ(x.to_vector(), piece(n - 1, {4}).to_vector());
}

TEST(TensorParallelLayers, ColumnAndRowParallelLinearMatchLinear) {
  const TensorParallel tp = world_tp();
  const std::int64_t in = 12, out = 20, rows = 6;
  Linear ref_col("col", in, out, true, 0.3f), ref_row("row", out, in, true, 0.3f);
  ColumnParallelLinear col("col", in, out, true, 0.3f, tp);
  RowParallelLinear row("row", out, in, true, 0.3f, tp);
  for (Layer* l : std::initializer_list<Layer*>{&ref_col, &ref_row, &col, &row}) initialize(*l, 4);

  const Tensor x = random_tensor({rows, in}, 1), dy_col = random_tensor({rows, out}, 2);
  auto [ref_y, ref_dx] = run_layer(ref_col, x, dy_col);
  const std::int64_t local_out = out / tp.size();
  auto [y, dx] = run_layer(col, x, dy_col.slice(1, tp.rank() * local_out, local_out).contiguous());
  EXPECT_TRUE(close_to("column output", y.to_vector(),
                       ref_y.slice(1, tp.rank() * local_out, local_out).to_vector(), 1e-5));
  EXPECT_TRUE(close_to("column dx", dx.to_vector(), ref_dx.to_vector(), 1e-5));
  expect_parameters_match(col.parameters(), ref_col.parameters(), 1e-5);

  // Row-parallel: the input arrives split by features (as a column-parallel output).
  const Tensor h = random_tensor({rows, out}, 3), dy_row = random_tensor({rows, in}, 4);
  auto [ref_z, ref_dh] = run_layer(ref_row, h, dy_row);
  auto [z, dh] = run_layer(row, h.slice(1, tp.rank() * local_out, local_out).contiguous(), dy_row);
  EXPECT_TRUE(close_to("row output", z.to_vector(), ref_z.to_vector(), 1e-5));
  EXPECT_TRUE(close_to("row dx", dh.to_vector(),
                       ref_dh.slice(1, tp.rank() * local_out, local_out).to_vector(), 1e-5));
  expect_parameters_match(row.parameters(), ref_row.parameters(), 1e-5);
}

// A block on [batch, seq, C], with and without sequence parallelism (whose input and output
// are this rank's share of the sequence).
void check_block(bool sequence_parallel) {
  const TensorParallel tp = world_tp(sequence_parallel);
  ModelConfig c = small_model();
  c.dropout = 0.25;  // masks must agree too
  TransformerBlock ref("h.0", c), block("h.0", c, tp);
  initialize(ref, 5);
  initialize(block, 5);
  const Tensor x = random_tensor({3, c.seq_len, c.d_model}, 6);
  const Tensor dy = random_tensor({3, c.seq_len, c.d_model}, 7);
  auto [ref_y, ref_dx] = run_layer(ref, x, dy);
  const std::int64_t share = sequence_parallel ? c.seq_len / tp.size() : c.seq_len;
  const std::int64_t first = sequence_parallel ? tp.rank() * share : 0;
  auto [y, dx] = run_layer(block, x.slice(1, first, share).contiguous(),
                           dy.slice(1, first, share).contiguous());
  EXPECT_TRUE(
      close_to("block output", y.to_vector(), ref_y.slice(1, first, share).to_vector(), 1e-5));
  EXPECT_TRUE(
      close_to("block dx", dx.to_vector(), ref_dx.slice(1, first, share).to_vector(), 1e-5));
  // Under sequence parallelism the replicated parameters hold partial gradients: sum them.
  for (Parameter* p : block.parameters())
    if (p->tensor_parallel_partial_grad) all_reduce_in_place(p->grad, tp);
  expect_parameters_match(block.parameters(), ref.parameters(), 1e-5);
}

TEST(TensorParallelLayers, TransformerBlockMatchesOneRank) { check_block(false); }
TEST(TensorParallelLayers, TransformerBlockWithSequenceParallelismMatchesOneRank) {
  check_block(true);
}

// The whole model: embedding (vocab-parallel), blocks, vocab-parallel cross-entropy.
void check_model(bool sequence_parallel) {
  const TensorParallel tp = world_tp(sequence_parallel);
  ModelConfig c = small_model();
  c.dropout = 0.1;
  GptModel ref(c), model(c, tp);
  ref.initialize(3);
  model.initialize(3);
  const Tensor tokens = test::i32_tensor(test::random_ints(3 * 8, 1, 0, 61), {3, 8});
  const Tensor targets = test::i32_tensor(test::random_ints(3 * 8, 2, 0, 61), {3, 8});
  auto loss_and_grads = [&](GptModel& m) {
    m.zero_grad();
    MicroBatchInfo info;
    info.seed = 4;
    ActivationContext ctx(info);
    const double loss = m.forward(tokens, targets, ctx);
    m.backward(1.0f / 24.0f, ctx);
    return loss;
  };
  const double ref_loss = loss_and_grads(ref);
  const double loss = loss_and_grads(model);
  EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss));
  for (Parameter* p : model.parameters())
    if (p->tensor_parallel_partial_grad) all_reduce_in_place(p->grad, tp);
  expect_parameters_match(model.parameters(), ref.parameters(), 1e-4);

  // Logits for generation: gathered over the vocabulary, equal to the reference's.
  MicroBatchInfo eval;
  eval.training = false;
  ActivationContext ref_ctx(eval), ctx(eval);
  EXPECT_TRUE(close_to("logits", model.logits(tokens, ctx).to_vector(),
                       ref.logits(tokens, ref_ctx).to_vector(), 1e-5));
}

TEST(TensorParallelModel, LossAndEveryGradientMatchOneRank) { check_model(false); }
TEST(TensorParallelModel, WithSequenceParallelismLossAndEveryGradientMatchOneRank) {
  check_model(true);
}

// Training: 20 steps, tensor-parallel against one rank, same losses, same parameters.
// Returns the tensor-parallel run's activation memory in its last step.
double check_training(bool sequence_parallel) {
  testing_mpi::world().barrier();
  const std::string dir = "/tmp/ternion-tp-test-" + std::to_string(::getpid());
  prepare_text(builtin_corpus_text(60000), dir, {.val_fraction = 0.1});
  TrainConfig c;
  c.model.seq_len = 16;
  c.model.n_layer = 2;
  c.model.n_head = 4;
  c.model.d_model = 32;
  c.model.dropout = 0.1;
  c.parallel.micro_batch_size = 2;
  c.parallel.tensor = testing_mpi::world().size();
  c.parallel.sequence_parallel = sequence_parallel;
  c.training.steps = 20;
  c.training.global_batch_size = 4;
  c.optimizer.lr = 3e-3;
  c.optimizer.warmup_steps = 2;
  c.optimizer.grad_clip = 0.5;  // clipping active: the global norm must be right
  c.data.train = dir + "/train.bin";
  c.data.val = dir + "/val.bin";

  Communicator& world = testing_mpi::world();
  const ProcessGroups groups(world, make_rank_layout(world.size(), world.size(), 1, 1));
  TrainConfig one = c;
  one.parallel.tensor = 1;
  one.parallel.sequence_parallel = false;
  Trainer reference(one), trainer(c, &groups);
  double activation_mb = 0.0;
  for (std::int64_t step = 1; step <= c.training.steps; ++step) {
    const StepMetrics want = reference.train_step(step);
    const StepMetrics got = trainer.train_step(step);
    activation_mb = got.activation_mb;
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss) << "step " << step;
    EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-4 * want.grad_norm) << "step " << step;
  }
  EXPECT_NEAR(trainer.evaluate(), reference.evaluate(), 1e-5 * reference.evaluate());
  // The parameters after 20 updates (values only: the gradients were zeroed... are the last
  // step's, compared too).
  expect_parameters_match(trainer.model().parameters(), reference.model().parameters(), 1e-3);
  world.barrier();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return activation_mb;
}

double g_activation_mb[2] = {0.0, 0.0};  // without and with sequence parallelism

TEST(TensorParallelTraining, TwentyStepsMatchOneRank) {
  g_activation_mb[0] = check_training(false);
}
TEST(TensorParallelTraining, WithSequenceParallelismTwentyStepsMatchOneRank) {
  g_activation_mb[1] = check_training(true);
}
// Sequence parallelism keeps the LayerNorm, dropout and residual activations of only this
// rank's share of the sequence.
TEST(TensorParallelTraining, SequenceParallelismHoldsLessActivationMemory) {
  ASSERT_GT(g_activation_mb[0], 0.0);
  EXPECT_LT(g_activation_mb[1], g_activation_mb[0])
      << "with " << g_activation_mb[1] << " MB, without " << g_activation_mb[0] << " MB";
  if (testing_mpi::world().rank() == 0)
    std::printf("activation memory per rank: %.3f MB, with sequence parallelism %.3f MB\n",
                g_activation_mb[0], g_activation_mb[1]);
}

}  // namespace
}  // namespace ternion
