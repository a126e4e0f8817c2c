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
                                 Communicator& data, std::int64_t bucket_bytes, bool zero1)
    : data_(data), zero1_(zero1) {
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
  const int parts = data_.size();
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

  // The gradients (and under ZeRO-1 the values) become views of the flat buffers.
  // f32 on the parameters' device (under mixed precision too: gradients accumulate in f32).
  const Device device = params_.empty() ? Device::cpu() : params_.front()->value.device();
  flat_grads_ = Tensor::zeros({offset}, DType::F32, device);
  if (zero1_) flat_values_ = Tensor::zeros({offset}, DType::F32, device);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i];
    const std::int64_t n = p.value.numel();
    Tensor grad = flat_grads_.slice(0, offsets_[i], n).view(p.value.shape());
    grad.copy_from(p.grad);
    p.grad = grad;
    if (zero1_) {
      Tensor value = flat_values_.slice(0, offsets_[i], n).view(p.value.shape());
      value.copy_from(p.value);
      p.value = value;
    }
  }

  // What this rank updates.
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const GradientBucket& bucket = buckets_[b];
    const std::int64_t chunk = bucket.numel / parts;
    const std::int64_t lo = zero1_ ? bucket.offset + data_.rank() * chunk : bucket.offset;
    const std::int64_t hi = zero1_ ? lo + chunk : bucket.offset + bucket.numel;
    for (std::size_t i : bucket.params) {
      const std::int64_t begin = std::max(lo, offsets_[i]);
      const std::int64_t end = std::min(hi, offsets_[i] + params_[i]->value.numel());
      if (begin < end) owned_.push_back({params_[i], begin - offsets_[i], end - offsets_[i]});
    }
    if (zero1_) shard_buffers_.push_back(Tensor::empty({chunk}, DType::F32, device));
  }
  begin_step();
}

void GradientReducer::begin_step() {
  pending_in_bucket_.clear();
  for (const GradientBucket& bucket : buckets_)
    pending_in_bucket_.push_back(static_cast<int>(bucket.params.size()));
  work_.assign(buckets_.size(), nullptr);
  ready_.assign(params_.size(), 0);
  finished_ = false;
  stats_ = ReducerStats{};
  stats_.buckets = static_cast<int>(buckets_.size());
}

void GradientReducer::mark_ready(const std::vector<Parameter*>& params) {
  TN_CHECK(!finished_, "mark_ready after finish: call begin_step first");
  for (const Parameter* p : params) {
    const auto it = index_of_.find(p);
    if (it == index_of_.end() || ready_[it->second]) continue;  // not ours, or reported already
    ready_[it->second] = 1;
    const auto b = static_cast<std::size_t>(bucket_of_param_[it->second]);
    if (--pending_in_bucket_[b] == 0 && !work_[b] && !(has_late_bucket_ && b + 1 == buckets_.size())) {
      start(b);
      ++stats_.buckets_started_early;
    }
  }
}

void GradientReducer::start(std::size_t b) {
  Tensor view = flat_grads_.slice(0, buckets_[b].offset, buckets_[b].numel);
  work_[b] = zero1_ ? data_.reduce_scatter_async(shard_buffers_[b], view, ReduceOp::Sum)
                    : data_.all_reduce_async(view, ReduceOp::Sum);
}

void GradientReducer::finish_reductions() {
  TN_CHECK(!finished_, "finish twice in one step: call begin_step first");
  finished_ = true;
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    if (!work_[b]) start(b);
  const auto wait_start = std::chrono::steady_clock::now();
  for (WorkHandle& work : work_) work->wait();
  stats_.exposed_wait_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  if (!zero1_) return;
  // The reduced chunk of each bucket back into the flat gradients, where the owned
  // segments' gradients are.
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const std::int64_t chunk = buckets_[b].numel / data_.size();
    flat_grads_.slice(0, buckets_[b].offset + data_.rank() * chunk, chunk).copy_from(shard_buffers_[b]);
  }
}

void GradientReducer::all_gather_parameters() {
  TN_CHECK(zero1_, "all_gather_parameters without ZeRO-1");
  std::vector<WorkHandle> gathers;
  for (const GradientBucket& bucket : buckets_) {
    Tensor whole = flat_values_.slice(0, bucket.offset, bucket.numel);
    const std::int64_t chunk = bucket.numel / data_.size();
    Tensor mine = whole.slice(0, data_.rank() * chunk, chunk);
    gathers.push_back(data_.all_gather_async(whole, mine));
  }
  for (WorkHandle& work : gathers) work->wait();
}

}  // namespace ternion
