#include "parallel/gradient_reducer.h"

#include <algorithm>
#include <unordered_map>

namespace ternion {

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<std::int64_t>& numels,
                                                  std::int64_t bucket_elements) {
  TN_CHECK(bucket_elements > 0, "bucket size ", bucket_elements);
  std::vector<GradientBucket> buckets;
  GradientBucket current;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    current.params.push_back(i);
    current.numel += numels[i];
    if (current.numel >= bucket_elements) {
      buckets.push_back(current);
      current = GradientBucket{current.offset + current.numel, 0, {}};
    }
  }
  if (!current.params.empty()) buckets.push_back(current);
  return buckets;
}

GradientReducer::GradientReducer(std::vector<Parameter*> params, std::vector<bool> late,
                                 std::unique_ptr<BucketReduction> reduction,
                                 std::int64_t bucket_bytes, int zero_stage)
    : reduction_(std::move(reduction)), zero_stage_(zero_stage) {
  TN_CHECK(reduction_ != nullptr, "a gradient reducer without its bucket reduction");
  TN_CHECK(zero_stage >= 0 && zero_stage <= 2, "ZeRO stage ", zero_stage);
  TN_CHECK(late.size() == params.size(), late.size(), " late flags for ", params.size(),
           " parameters");
  // The flat order: the early parameters as given, then the late ones.
  for (bool want_late : {false, true})
    for (std::size_t i = 0; i < params.size(); ++i)
      if (late[i] == want_late) params_.push_back(params[i]);
  for (std::size_t i = 0; i < params_.size(); ++i) index_of_[params_[i]] = i;
  TN_CHECK(index_of_.size() == params_.size(), "a parameter listed twice");
  const std::size_t early = static_cast<std::size_t>(std::count(late.begin(), late.end(), false));
  std::vector<std::int64_t> numels;
  for (std::size_t i = 0; i < early; ++i) numels.push_back(params_[i]->value.numel());
  buckets_ = plan_gradient_buckets(numels, std::max<std::int64_t>(1, bucket_bytes / 4));
  has_late_bucket_ = early < params_.size();
  if (has_late_bucket_) {
    GradientBucket last;
    for (std::size_t i = early; i < params_.size(); ++i) last.params.push_back(i);
    buckets_.push_back(last);
  }

  // Offsets, each bucket padded to a multiple of the group size so its chunks are equal.
  const int parts = reduction_->size();
  std::int64_t offset = 0;
  offsets_.assign(params_.size(), 0);
  bucket_of_param_.assign(params_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    GradientBucket& bucket = buckets_[b];
    bucket.offset = offset;
    bucket.numel = 0;
    for (std::size_t i : bucket.params) {
      offsets_[i] = offset + bucket.numel;
      bucket.numel += params_[i]->value.numel();
      bucket_of_param_[i] = static_cast<int>(b);
    }
    bucket.numel = (bucket.numel + parts - 1) / parts * parts;
    offset += bucket.numel;
  }

  // The gradients (and under ZeRO the values) become views of the flat buffers: f32 on the
  // parameters' device (under mixed precision too: gradients accumulate in f32). Under ZeRO-2
  // only the late bucket's gradients have a lasting whole buffer; the others get one while a
  // backward fills them (give_buffer).
  device_ = params_.empty() ? Device::cpu() : params_.front()->value.device();
  const std::int64_t late_offset = has_late_bucket_ ? buckets_.back().offset : offset;
  const std::int64_t grads_begin = shards_gradients() ? late_offset : 0;
  flat_grads_ = Tensor::zeros({offset - grads_begin}, DType::F32, device_);
  if (shards_optimizer_state()) flat_values_ = Tensor::zeros({offset}, DType::F32, device_);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    const std::int64_t n = p.value.numel();
    if (offsets_[i] >= grads_begin) {
      Tensor grad = flat_grads_.slice(0, offsets_[i] - grads_begin, n).view(p.value.shape());
      grad.copy_from(p.grad);
      p.grad = grad;
    } else {
      p.grad = Tensor();  // until give_buffer
    }
    if (shards_optimizer_state()) {
      Tensor value = flat_values_.slice(0, offsets_[i], n).view(p.value.shape());
      value.copy_from(p.value);
      p.value = value;
    }
  }
  bucket_grads_.assign(buckets_.size(), Tensor());
  if (shards_gradients()) {
    std::int64_t shard = 0;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      shard_offsets_.push_back(shard);
      shard += chunk_numel(b);
    }
    shard_grads_ = Tensor::zeros({shard}, DType::F32, device_);
  }

  // What this rank updates.
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const GradientBucket& bucket = buckets_[b];
    const std::int64_t chunk = chunk_numel(b);
    const bool sharded = shards_optimizer_state();
    const std::int64_t lo = sharded ? bucket.offset + chunk_begin(b) : bucket.offset;
    const std::int64_t hi = sharded ? lo + chunk : bucket.offset + bucket.numel;
    for (std::size_t i : bucket.params) {
      const std::int64_t begin = std::max(lo, offsets_[i]);
      const std::int64_t end = std::min(hi, offsets_[i] + params_[i]->value.numel());
      if (begin >= end) continue;
      ParameterSegment segment{params_[i], begin - offsets_[i], end - offsets_[i], Tensor()};
      if (shards_gradients())
        segment.reduced_grad = shard_grads_.slice(0, shard_offsets_[b] + begin - lo, end - begin);
      owned_.push_back(segment);
    }
    if (zero_stage_ == 1) shard_buffers_.push_back(Tensor::empty({chunk}, DType::F32, device_));
  }
  std::vector<std::vector<BucketMember>> members(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (std::size_t i : buckets_[b].params)
      members[b].push_back(
          {params_[i]->name, params_[i]->value.shape(), offsets_[i] - buckets_[b].offset});
  reduction_->plan(members);
  begin_step();
}

void GradientReducer::begin_step() {
  TN_CHECK(in_flight_.empty(), "begin_step with reductions under way: call finish first");
  pending_in_bucket_.clear();
  for (const GradientBucket& bucket : buckets_)
    pending_in_bucket_.push_back(static_cast<int>(bucket.params.size()));
  work_.assign(buckets_.size(), nullptr);
  ready_.assign(params_.size(), 0);
  finished_ = false;
  stats_ = ReducerStats{};
  stats_.buckets = static_cast<int>(buckets_.size());
  stats_.peak_gradient_bytes = lasting_gradient_bytes();
  if (shards_gradients()) shard_grads_.zero();
}

std::size_t GradientReducer::lasting_gradient_bytes() const {
  std::size_t bytes = flat_grads_.nbytes() + (shard_grads_.defined() ? shard_grads_.nbytes() : 0);
  for (const Tensor& t : shard_buffers_) bytes += t.nbytes();
  return bytes;
}

void GradientReducer::give_buffer(std::size_t b) {
  // This rank's chunk starts from the shard's sum so far, the others' from zero: the
  // reduce-scatter then writes the shard's new sum in place (no separate add), once the
  // bucket's previous reduction, which wrote it, is complete.
  for (InFlight& r : in_flight_)
    if (r.bucket == b) r.work->wait();
  retire(/*wait=*/false);
  Tensor& whole = bucket_grads_[b];
  whole = Tensor::zeros({buckets_[b].numel}, DType::F32, device_);
  whole.slice(0, chunk_begin(b), chunk_numel(b)).copy_from(shard_of(b));
  for (std::size_t i : buckets_[b].params)
    params_[i]->grad = whole.slice(0, offsets_[i] - buckets_[b].offset, params_[i]->value.numel())
                           .view(params_[i]->value.shape());
  std::size_t live = lasting_gradient_bytes();
  for (const Tensor& t : bucket_grads_) live += t.defined() ? t.nbytes() : 0;
  for (const InFlight& r : in_flight_) live += is_late(r.bucket) ? 0 : r.whole.nbytes();
  stats_.peak_gradient_bytes = std::max(stats_.peak_gradient_bytes, live);
}

void GradientReducer::prepare(const std::vector<Parameter*>& params) {
  reduction_->progress();
  if (!shards_gradients()) return;
  retire(/*wait=*/false);  // what has arrived frees its buffers before new ones are taken
  for (const Parameter* p : params) {
    const auto it = index_of_.find(p);
    if (it == index_of_.end()) continue;
    const auto b = static_cast<std::size_t>(bucket_of_param_[it->second]);
    if (!is_late(b) && !bucket_grads_[b].defined()) give_buffer(b);
  }
}

void GradientReducer::mark_ready(const std::vector<Parameter*>& params) {
  TN_CHECK(!finished_, "mark_ready after finish: call begin_step first");
  reduction_->progress();
  for (const Parameter* p : params) {
    const auto it = index_of_.find(p);
    if (it == index_of_.end() || ready_[it->second]) continue;  // not ours, or reported already
    ready_[it->second] = 1;
    const auto b = static_cast<std::size_t>(bucket_of_param_[it->second]);
    if (--pending_in_bucket_[b] != 0 || is_late(b)) continue;
    if (shards_gradients()) {
      start_sharded(b);
    } else if (!work_[b]) {
      start(b);
    }
    ++stats_.buckets_started_early;
  }
}

void GradientReducer::start(std::size_t b) {
  Tensor view = flat_grads_.slice(0, buckets_[b].offset, buckets_[b].numel);
  work_[b] = zero_stage_ == 1 ? reduction_->reduce_scatter(b, shard_buffers_[b], view)
                              : reduction_->all_reduce(b, view);
}

void GradientReducer::start_sharded(std::size_t b) {
  // The bucket's whole gradient goes to the reduction; the next backward to write into it
  // gets a fresh buffer, and the bucket counts its parameters afresh.
  // The late bucket's whole gradient lasts the step and its shard is still zero: the
  // reduce-scatter's sum is the shard's.
  Tensor whole = is_late(b) ? flat_grads_ : bucket_grads_[b];
  Tensor shard = shard_of(b);
  in_flight_.push_back({b, reduction_->reduce_scatter(b, shard, whole), whole});
  // A backward faster than the network would otherwise hold every bucket's whole buffer.
  constexpr std::size_t kMaxInFlight = 2;
  while (in_flight_.size() > kMaxInFlight) {
    in_flight_.front().work->wait();
    in_flight_.erase(in_flight_.begin());
  }
  if (!is_late(b)) {
    bucket_grads_[b] = Tensor();
    for (std::size_t i : buckets_[b].params) params_[i]->grad = Tensor();
  }
  pending_in_bucket_[b] = static_cast<int>(buckets_[b].params.size());
  for (std::size_t i : buckets_[b].params) ready_[i] = 0;
}

void GradientReducer::retire(bool wait) {
  std::vector<InFlight> still;
  for (InFlight& r : in_flight_) {
    if (wait || r.work->is_completed()) {
      r.work->wait();  // its whole buffer is released with it
    } else {
      still.push_back(std::move(r));
    }
  }
  in_flight_ = std::move(still);
}

void GradientReducer::finish_reductions() {
  TN_CHECK(!finished_, "finish twice in one step: call begin_step first");
  finished_ = true;
  const auto wait_start = std::chrono::steady_clock::now();
  if (shards_gradients()) {
    // What backward left in a buffer since its last reduction (a bucket whose parameters were
    // not all reported again, the late bucket), then everything under way.
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      if (is_late(b) || bucket_grads_[b].defined()) start_sharded(b);
    retire(/*wait=*/true);
    stats_.exposed_wait_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
    return;
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    if (!work_[b]) start(b);
  for (WorkHandle& work : work_) work->wait();
  stats_.exposed_wait_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  if (zero_stage_ != 1) return;
  // The reduced chunk of each bucket back into the flat gradients, where the owned
  // segments' gradients are.
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    flat_grads_.slice(0, buckets_[b].offset + chunk_begin(b), chunk_numel(b))
        .copy_from(shard_buffers_[b]);
  }
}

void GradientReducer::all_gather_parameters() {
  TN_CHECK(shards_optimizer_state(), "all_gather_parameters without ZeRO");
  std::vector<WorkHandle> gathers;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Tensor whole = flat_values_.slice(0, buckets_[b].offset, buckets_[b].numel);
    Tensor mine = whole.slice(0, chunk_begin(b), chunk_numel(b));
    gathers.push_back(reduction_->all_gather(whole, mine));
  }
  for (WorkHandle& work : gathers) work->wait();
}

}  // namespace ternion
