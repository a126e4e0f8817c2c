// Data-parallel gradient reduction in buckets, overlapped with backward (PyTorch DDP's and
// Megatron-LM's scheme), with ZeRO stage 1 sharding.
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
// Parameters flagged `late` (the pipeline's tied embedding, whose two copies must first be
// summed over the embedding group) are kept out of the early buckets: they form the last
// bucket, reduced by finish(late_sums) once the caller has done those sums.
#pragma once

#include <chrono>
#include <unordered_map>
#include <cstdint>
#include <vector>

#include "framework/parameter.h"
#include "parallel/comm/communicator.h"

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
};

class GradientReducer {
 public:
  // `params` in the order backward finishes them; `late[i]` keeps params[i] for the last
  // bucket. `data` is the data-parallel group.
  GradientReducer(std::vector<Parameter*> params, std::vector<bool> late, Communicator& data,
                  std::int64_t bucket_bytes, bool zero1);

  void begin_step();                                  // no bucket ready yet
  void mark_ready(const std::vector<Parameter*>& params);
  // Starts what is not started yet, waits for every reduction; `late_sums` runs first (the
  // caller's embedding-group sums of the late parameters).
  template <class LateSums>
  void finish(LateSums&& late_sums) {
    late_sums();
    finish_reductions();
  }
  // ZeRO-1: every rank gets the updated values of every parameter.
  void all_gather_parameters();

  // The parameter segments this rank updates: all of every parameter, or under ZeRO-1 this
  // rank's chunks of the buckets.
  const std::vector<ParameterSegment>& owned_segments() const { return owned_; }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  const ReducerStats& stats() const { return stats_; }
  bool zero1() const { return zero1_; }

 private:
  void start(std::size_t bucket);
  void finish_reductions();

  std::vector<Parameter*> params_;
  std::unordered_map<const Parameter*, std::size_t> index_of_;
  std::vector<std::int64_t> offsets_;  // each parameter's offset in the flat buffers
  Communicator& data_;
  bool zero1_;
  bool has_late_bucket_ = false;  // the last bucket holds the late parameters
  Tensor flat_grads_, flat_values_;
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
