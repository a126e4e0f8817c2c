#!/usr/bin/env bash
# tools/mutation-check.sh: plants known bugs, one at a time, in a scratch worktree of HEAD and
# runs the tests that should catch each; prints which were caught and by which tests. Not
# part of CI (it rebuilds once per bug: under a minute a bug on 2 cores, after a first full
# build); docs/testing.md holds its last result.
#
#   bash tools/mutation-check.sh [SCRATCH_DIR [NAME_REGEX]]
#
# NAME_REGEX (grep -E) plants only the bugs whose names match it: a rerun after a test changed.
#
# Each bug is an exact text replacement in one file (the script fails if the text is not
# found, so a refactor cannot turn a mutation into a silent no-op) and a ctest regex.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${1:-$(mktemp -d /tmp/ternion-mutations.XXXXXX)}
only=${2:-}
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # GNU nproc would report OMP_NUM_THREADS
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# name | file | text | replacement | tests (ctest -R)
mutations=(
  "tensor parallelism switched off in the trainer (each rank trains the whole model)|training/trainer.cpp|tp_{groups_.tp_size() > 1 ? &groups_.tensor() : nullptr,|tp_{false ? &groups_.tensor() : nullptr,|^tensor_parallel\\."
  "a data-parallel gradient bucket reduced twice|parallel/gradient_reducer.cpp|                              : reduction_->all_reduce(b, view);|                              : (b == 0 ? (reduction_->all_reduce(b, view)->wait(), reduction_->all_reduce(b, view)) : reduction_->all_reduce(b, view));|^data_parallel\\."
  "sequence-parallel partial gradients never summed over the tensor group|training/trainer.cpp|  if (tp_.active())
    for (const ParameterSegment& s : segments_)|  if (false)
    for (const ParameterSegment& s : segments_)|^tensor_parallel\\."
  "ZeRO-1: the first bucket's updated shards never all-gathered (data ranks' parameters diverge)|parallel/gradient_reducer.cpp|  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Tensor whole = flat_values_.slice|  for (std::size_t b = 1; b < buckets_.size(); ++b) {
    Tensor whole = flat_values_.slice|^data_parallel\\."
  "a row-parallel linear's bias added on every tensor rank before the reduction (tp times)|layers/linear.cpp|  Tensor y = local_.forward(input, ctx);
  if (tp_.sequence_parallel) {
    y = reduce_scatter_to_sequence_region(y, tp_);
  } else {
    reduce_from_tensor_region(y, tp_);
  }
  if (has_bias_) {
    Tensor rows = y.view({-1, y.size(-1)});
    bias_add_forward(rows, bias_.compute_value());
  }|  Tensor y = local_.forward(input, ctx);
  if (has_bias_) {
    Tensor rows = y.view({-1, y.size(-1)});
    bias_add_forward(rows, bias_.compute_value());
  }
  if (tp_.sequence_parallel) {
    y = reduce_scatter_to_sequence_region(y, tp_);
  } else {
    reduce_from_tensor_region(y, tp_);
  }|^tensor_parallel\\."
  "sequence parallelism: learned positions taken from 0 on every tensor rank (local, not global)|layers/embedding.cpp|first_position = tp_.rank() * out.size(1);|first_position = 0;|^tensor_parallel\\."
  "sequence parallelism: dropout masks indexed by local, not global, positions|layers/dropout.cpp|return {info.sample_offset, tp_.rank() * local_seq, local_seq * tp_.size()};|return {info.sample_offset, 0, local_seq * tp_.size()};|^tensor_parallel\\."
  "every micro-batch of a step draws the first one's dropout masks|training/model_stage.cpp|info.sample_offset = info_.sample_offset + micro_batch * batch.inputs.size(0);|info.sample_offset = info_.sample_offset;|^data_parallel\\."
  "the loss weight one over this data rank's tokens, not the global batch's|training/trainer.cpp|static_cast<float>(1.0 / valid_tokens)|static_cast<float>(groups_.dp_size() / valid_tokens)|^data_parallel\\."
  "data ranks read overlapping samples (offset by a micro-batch, not a rank's share)|training/trainer.cpp|const std::int64_t first = groups_.dp_rank() * share;|const std::int64_t first = groups_.dp_rank() * micro;|^data_parallel\\."
  "pipeline: the tied embedding's two copies' gradients never summed|training/trainer.cpp|        groups_.embedding()->all_reduce(chunk->tied_embedding()->grad, ReduceOp::Sum);|        {}|^pipeline_parallel\\.|^llama\\.train_pp2_tied"
  "interleaved pipeline: chunks take consecutive virtual stages (blocks 0, 2, 1, 3 in order)|layers/gpt_model.cpp|const int v = c * stages + stage;|const int v = stage * virtual_stages + c;|^pipeline_parallel\\."
  "gradient norm: replicated parameters counted once per tensor rank|training/trainer.cpp|tp_.rank() == 0)) counted.push_back(s.grad());|true)) counted.push_back(s.grad());|^tensor_parallel\\."
  "checkpoint load: every tensor rank takes the first shard's slice|training/checkpoint.cpp|for_each_run(p.value.shape(), global_shape, p.shard_dim, p.shard_offset, target.begin,|for_each_run(p.value.shape(), global_shape, p.shard_dim, 0, target.begin,|^checkpoint\\."
  "PowerSGD: the error-feedback residual never updated|parallel/powersgd_reduction.cpp|           m.residual.copy_from(g);
           matmul(m.residual, p, m.next_q, false, true, -inverse_ranks, 1.0f);
|           (void)inverse_ranks;
|^parallel_mpi\\.(process_groups_np8\$|powersgd_trains\$)|^checkpoint\\.np4\$"
  "KV-cache decoding: learned positions one past the cached ones|layers/embedding.cpp|std::int64_t first_position = ctx.info().kv_cache ? ctx.info().kv_cache->positions() : 0;|std::int64_t first_position = ctx.info().kv_cache ? ctx.info().kv_cache->positions() + 1 : 0;|^(KvCacheDecoder|GenerateCached)\\.|^cli\\.generate"
  "validation: the data ranks' token counts never summed (each rank's loss over its own)|training/trainer.cpp|    valid_tokens = all_reduce_double(groups_.data(), valid_tokens);
  }
  check_communication_health();|  }
  check_communication_health();|^data_parallel\\."
  "model.init_from under tensor parallelism: every rank takes the first shard|training/hf_import.cpp|full.slice(p->shard_dim, p->shard_offset,|full.slice(p->shard_dim, 0,|^tensor_parallel\\.|^cli\\.init_from"
  "ZeRO-1 in bf16: compute copies refreshed before the all-gather (other ranks' shards a step stale)|training/trainer.cpp|    if (reducer_ && reducer_->shards_optimizer_state()) reducer_->all_gather_parameters();
    after_master_update();|    after_master_update();
    if (reducer_ && reducer_->shards_optimizer_state()) reducer_->all_gather_parameters();|^data_parallel\\."
)

git worktree add --detach "$scratch/tree" HEAD >/dev/null
trap 'git worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true' EXIT
tree=$scratch/tree build=$scratch/build
echo "mutation-check: building HEAD (CPU path) in $build"
cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTERNION_CUDA=OFF >/dev/null
cmake --build "$build" -j"$jobs" >/dev/null 2>&1
# The tests must pass before any bug is planted.
# fields M: the five fields of mutation M (its text may span lines).
fields() { IFS='|' read -r -d '' name file text replacement tests <<<"$1" || true; tests=${tests%$'\n'}; }
selected() { [ -z "$only" ] || grep -Eq -- "$only" <<<"$name"; }
for m in "${mutations[@]}"; do
  fields "$m"
  selected || continue
  ctest --test-dir "$build" -j"$jobs" -R "$tests" >/dev/null 2>&1 ||
    { echo "mutation-check: '$tests' fails without any planted bug"; exit 1; }
done

results=()
for m in "${mutations[@]}"; do
  fields "$m"
  selected || continue
  echo "mutation-check: planting: $name"
  TEXT=$text REPLACEMENT=$replacement perl -0pi -e \
    '$n = s/\Q$ENV{TEXT}\E/$ENV{REPLACEMENT}/g; END { exit($n == 1 ? 0 : 3) }' "$tree/$file" ||
    { echo "mutation-check: the text of '$name' is not found once in $file"; exit 1; }
  cmake --build "$build" -j"$jobs" >/dev/null 2>&1 || { echo "mutation-check: '$name' does not build"; exit 1; }
  caught=$( { ctest --test-dir "$build" -j"$jobs" -R "$tests" 2>&1 || true; } |
             sed -n 's/^[[:space:]]*[0-9]* - \(.*\) ([A-Za-z ]*)$/\1/p' | tr '\n' ' ')
  # (Failed), (Timeout), (SEGFAULT)...: each catches it. A | in a table cell is escaped.
  results+=("| $name | \`${tests//|/\\|}\` | ${caught:-**not caught**} |")
  git -C "$tree" checkout -- "$file"
done
cmake --build "$build" -j"$jobs" >/dev/null 2>&1  # leaves the scratch build as HEAD

echo
echo "| planted bug | tests run | failed (caught by) |"
echo "| --- | --- | --- |"
printf '%s\n' "${results[@]}"
rm -rf "$build"
