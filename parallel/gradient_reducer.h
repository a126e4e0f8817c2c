// Data-parallel gradient reduction in buckets, overlapped with backward (PyTorch DDP's and
// Megatron-LM's scheme), with ZeRO stage 1 and 2 sharding.
//
// The parameters' gradients are moved into one flat buffer, in the order backward finishes
// them (the reverse of their use in forward), and the buffer is cut into buckets of about
// `parallel.bucket_size_mb`. During the last micro-batch's backward the model reports each
// layer's parameters as their gradients become final (mark_ready); once every parameter of a
// bucket is final, its reduction over the data-parallel group starts at once, asynchronously,
// while backward goes on. finish() waits for the rest. Earlier micro-batches only accumulate.
//
// Gradients are summed, not averaged: each rank's loss is already weighted by the global
// batch's token count, so the sum is the global-batch gradient.
//
// ZeRO-1: buckets are reduce-scattered instead of all-reduced; rank r of the data-parallel
// group keeps the reduced gradient of chunk r of every bucket (chunk_range), updates only those
// parameters (the optimizer holds state for them alone), and all_gather_parameters() gives
// every rank the updated parameters. The parameters' values then also live in one flat buffer,
// so the gather lands in place.
//
// ZeRO-2: the gradients are sharded too. A bucket's whole gradient exists only while a backward
// fills it: prepare() (before a layer writes its gradients) gives the bucket a zeroed buffer,
// and once every parameter of the bucket is final for the micro-batch (mark_ready, every
// micro-batch, not the last only) it is reduce-scattered, asynchronously, into this rank's
// persistent shard, and released once the reduction completes (the buffer's own chunk starts
// from the shard's sum so far, so the reduction's result is the new sum; at most two are in
// flight, a third waits for the oldest). So
// gradient accumulation over micro-batches happens in the shard, after the reduction: one
// reduce-scatter per bucket per micro-batch (m times ZeRO-1's traffic for m micro-batches),
// for gradient memory of 1/D of the whole plus the buckets in flight. (Accumulating whole
// gradients first, then reducing, would need the whole buffer for the step: ZeRO-1's memory.)
// owned_segments() then carry their gradient in ParameterSegment::reduced_grad.
//
// How each bucket travels (flat or hierarchical over the nodes, f32 or bf16 on the wire) is
// the BucketReduction's (parallel/bucket_reduction.h); under ZeRO it also says which chunk of
// each bucket this rank keeps (shard_index(): the data rank when flat).
//
// Parameters flagged `late` (the pipeline's tied embedding, whose two copies must first be
// summed over the embedding group) are kept out of the early buckets: they form the last
// bucket, whose whole gradient stays for the step (under ZeRO-2 too), reduced by
// finish(late_sums) once the caller has done those sums.
#pragma once

#include <chrono>
#include <memory>
#include <unordered_map>
#include <cstdint>
#include <vector>

#include "framework/parameter.h"
#include "parallel/bucket_reduction.h"

namespace ternion {

struct GradientBucket {
  std::int64_t offset = 0, numel = 0;  // in the flat buffer
  std::vector<std::size_t> params;     // indices into the reducer's parameter list
};

// Buckets over parameters of `numels` elements, in order, each closed once it reaches
// `bucket_elements` (a parameter is never split: the bucket it completes may be larger).
std::vector<GradientBucket> plan_gradient_buckets(const std::vector<std::int64_t>& numels,
                                                  std::int64_t bucket_elements);

struct ReducerStats {
  int buckets_started_early = 0;  // reductions started by mark_ready, before finish()
  int buckets = 0;
  double exposed_wait_s = 0.0;    // time finish() spent waiting for reductions
  // The most memory the gradients held at once this step: the lasting buffers, and under
  // ZeRO-2 the whole buffers of the buckets being filled or reduced.
  std::size_t peak_gradient_bytes = 0;
};

class GradientReducer {
 public:
  // `params` in the order backward finishes them; `late[i]` keeps params[i] for the last
  // bucket. `reduction` moves buckets over the data-parallel group; `zero_stage` 0, 1 or 2.
  GradientReducer(std::vector<Parameter*> params, std::vector<bool> late,
                  std::unique_ptr<BucketReduction> reduction, std::int64_t bucket_bytes,
                  int zero_stage);

  void begin_step();                                  // no bucket ready yet
  // ZeRO-2: before a backward writes `params`' gradients (no-op otherwise).
  void prepare(const std::vector<Parameter*>& params);
  void mark_ready(const std::vector<Parameter*>& params);
  // Starts what is not started yet, waits for every reduction; `late_sums` runs first (the
  // caller's embedding-group sums of the late parameters).
  template <class LateSums>
  void finish(LateSums&& late_sums) {
    late_sums();
    finish_reductions();
  }
  // ZeRO-1 and 2: every rank gets the updated values of every parameter.
  void all_gather_parameters();

  // The parameter segments this rank updates: all of every parameter, or under ZeRO this
  // rank's chunks of the buckets.
  const std::vector<ParameterSegment>& owned_segments() const { return owned_; }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  const ReducerStats& stats() const { return stats_; }
  BucketReduction& reduction() { return *reduction_; }
  // The gradients' lasting buffers: whole, or under ZeRO-2 this rank's shard (and the late
  // bucket).
  std::size_t lasting_gradient_bytes() const;
  bool shards_optimizer_state() const { return zero_stage_ >= 1; }
  bool shards_gradients() const { return zero_stage_ == 2; }
  // Whether mark_ready wants every micro-batch's reports (ZeRO-2), or the last one's only.
  bool reduces_every_micro_batch() const { return shards_gradients(); }

 private:
  // A ZeRO-2 reduce-scatter under way: its bucket's whole gradient, kept until it completes.
  struct InFlight {
    std::size_t bucket;
    WorkHandle work;
    Tensor whole;
  };
  bool is_late(std::size_t bucket) const {
    return has_late_bucket_ && bucket + 1 == buckets_.size();
  }
  std::int64_t chunk_numel(std::size_t bucket) const {
    return buckets_[bucket].numel / reduction_->size();
  }
  // Where this rank's chunk of `bucket` starts in the bucket.
  std::int64_t chunk_begin(std::size_t bucket) const {
    return reduction_->shard_index() * chunk_numel(bucket);
  }
  Tensor shard_of(std::size_t bucket) const {  // ZeRO-2: this rank's reduced chunk
    return shard_grads_.slice(0, shard_offsets_[bucket], chunk_numel(bucket));
  }
  void start(std::size_t bucket);
  void finish_reductions();
  // ZeRO-2: a zeroed whole buffer for `bucket`, its parameters' gradients views of it.
  void give_buffer(std::size_t bucket);
  void start_sharded(std::size_t bucket);
  void retire(bool wait);  // releases the completed reductions (with wait: all of them)

  std::vector<Parameter*> params_;
  std::unordered_map<const Parameter*, std::size_t> index_of_;
  std::vector<std::int64_t> offsets_;  // each parameter's offset in the flat buffers
  std::unique_ptr<BucketReduction> reduction_;
  int zero_stage_;
  bool has_late_bucket_ = false;  // the last bucket holds the late parameters
  Device device_;
  Tensor flat_grads_, flat_values_;  // ZeRO-2: flat_grads_ holds the late bucket only
  // ZeRO-2: this rank's reduced chunk of every bucket, back to back, and each bucket's whole
  // gradient while a backward fills it.
  Tensor shard_grads_;
  std::vector<std::int64_t> shard_offsets_;
  std::vector<Tensor> bucket_grads_;
  std::vector<InFlight> in_flight_;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_param_;
  std::vector<int> pending_in_bucket_;
  std::vector<char> ready_;  // this step, per parameter
  bool finished_ = false;    // finish() ran this step
  std::vector<WorkHandle> work_;
  std::vector<Tensor> shard_buffers_;  // ZeRO-1: the reduced chunk of each bucket
  std::vector<ParameterSegment> owned_;
  ReducerStats stats_;
};

}  // namespace ternion
