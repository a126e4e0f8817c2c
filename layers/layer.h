// The Layer interface and the per-micro-batch activation context.
//
// Layers hold parameters, never activations: whatever forward saves for backward goes into
// the ActivationContext of that micro-batch, so several micro-batches can be in flight at
// once (pipeline schedules run forward of micro-batch m+1 before backward of m).
//
// Gradient contract (llm.c's): parameter gradients accumulate (+=) so micro-batches add up;
// the activation gradient a backward returns is freshly computed (it never aliases what the
// caller passed in unless documented).
//
// Split backward (the zero-bubble pipeline schedule): a backward computes its input gradient
// and hands the work of its parameter gradients to ActivationContext::weight_gradients, which
// runs it at once, or under deferral keeps it to run later (the schedule's W) on what the
// work captured. So that work reads a parameter's gradient when it runs (ZeRO-2 gives a
// gradient its memory only then), and a gradient tensor a backward captured for it is not
// written afterwards by anyone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/error.h"
#include "framework/tensor.h"
#include "framework/parameter.h"

namespace ternion {

class KvCache;  // layers/kv_cache.h

// What a layer may need to know about the micro-batch it is processing.
struct MicroBatchInfo {
  std::int64_t step = 1;           // optimizer step (1-based); keys dropout masks
  std::int64_t micro_batch = 0;    // index of this micro-batch within the step
  std::int64_t sample_offset = 0;  // index in the global batch of this micro-batch's first sample
  std::uint64_t seed = 0;          // run seed
  bool training = true;            // dropout on; false for evaluation and generation
  // The weight of each token's loss in this micro-batch's backward, where it is known before
  // the forward (a training step): the LM head then computes the logits' gradient in the
  // forward's pass over them (kernels/cross_entropy.h: cross_entropy_forward_backward), and the
  // backward must be given the same weight.
  std::optional<float> loss_weight;
  // Incremental decoding (layers/kv_cache.h): the tokens sit at positions kv_cache->positions()
  // onwards and attention reads the cached keys and values. Null in training and evaluation.
  KvCache* kv_cache = nullptr;
};

// Base of whatever a layer saves for its backward.
struct SavedActivations {
  virtual ~SavedActivations() = default;
};

// An input a layer keeps for its backward: the tensor itself, or under selective
// recomputation (ActivationContext::keep) the recipe its producer offered for it.
class SavedInput {
 public:
  SavedInput() = default;
  explicit SavedInput(Tensor tensor) : tensor_(std::move(tensor)) {}
  SavedInput(std::function<Tensor()> recipe, Shape shape)
      : recipe_(std::move(recipe)), shape_(std::move(shape)) {}
  // The input, recomputed if need be, in the shape it was kept as.
  Tensor get() const { return tensor_.defined() ? tensor_ : recipe_().view(shape_); }
  bool recomputed() const { return !tensor_.defined(); }

 private:
  Tensor tensor_;
  std::function<Tensor()> recipe_;
  Shape shape_;
};

class ActivationContext {
 public:
  explicit ActivationContext(MicroBatchInfo info) : info_(info) {}
  ActivationContext(const ActivationContext&) = delete;
  ActivationContext& operator=(const ActivationContext&) = delete;

  const MicroBatchInfo& info() const { return info_; }

  // A fresh slot for `owner`'s saved tensors (one per layer per micro-batch).
  template <class Saved>
  Saved& save(const void* owner) {
    auto slot = std::make_unique<Saved>();
    Saved& ref = *slot;
    auto [it, inserted] = slots_.emplace(owner, std::move(slot));
    TN_CHECK(inserted, "a layer saved twice in one micro-batch");
    return ref;
  }
  // Takes `owner`'s slot out of the context (backward frees activations as it goes).
  template <class Saved>
  Saved take(const void* owner) {
    auto it = slots_.find(owner);
    TN_CHECK(it != slots_.end(), "backward without a matching forward in this micro-batch");
    auto* saved = dynamic_cast<Saved*>(it->second.get());
    TN_CHECK(saved != nullptr, "saved activations of the wrong type");
    Saved out = std::move(*saved);
    slots_.erase(it);
    return out;
  }
  // `owner`'s slot, left in place (a layer's backward that reads what the layer before it saved).
  template <class Saved>
  const Saved& peek(const void* owner) const {
    auto it = slots_.find(owner);
    TN_CHECK(it != slots_.end(), "no saved activations to read in this micro-batch");
    const auto* saved = dynamic_cast<const Saved*>(it->second.get());
    TN_CHECK(saved != nullptr, "saved activations of the wrong type");
    return *saved;
  }
  bool empty() const { return slots_.empty() && weight_gradients_.empty(); }

  // Split backward (see the top of this file). Off by default: weight_gradients runs `work`
  // now, so a plain backward computes what it always did, in the same order.
  void set_defer_weight_gradients(bool on) { defer_ = on; }
  bool defers_weight_gradients() const { return defer_; }
  void weight_gradients(std::function<void()> work);
  // The deferred work so far, in the order it was handed over, leaving none.
  std::vector<std::function<void()>> take_weight_gradients();

  // Selective recomputation (training.recompute: selective). A layer whose output is cheap to
  // compute again from what it saves anyway (a norm's, an activation's) offers a recipe for
  // it; the next layer to keep an input (keep()) gets the recipe instead if its input is that
  // very tensor, so the output is not held from forward to backward. One offer is pending at
  // a time, and the next keep() ends it either way (an offer no one takes holds nothing).
  // Without selective recomputation, offers are dropped and keep() keeps the tensor.
  void set_selective_recompute(bool on) { selective_ = on; }
  bool selective_recompute() const { return selective_; }
  void offer_recompute(const Tensor& output, std::function<Tensor()> recipe);
  SavedInput keep(const Tensor& input);

 private:
  struct Offer {
    std::weak_ptr<const Storage> storage;  // expired: the tensor is gone, the offer stale
    std::int64_t offset = 0, numel = 0;
    std::function<Tensor()> recipe;
  };
  MicroBatchInfo info_;
  std::unordered_map<const void*, std::unique_ptr<SavedActivations>> slots_;
  bool selective_ = false;
  std::optional<Offer> offer_;
  bool defer_ = false;
  std::vector<std::function<void()>> weight_gradients_;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // [batch, seq, d_in] -> [batch, seq, d_out] (token layers take i32 [batch, seq]).
  virtual Tensor forward(const Tensor& input, ActivationContext& ctx) = 0;
  // Gradient of the input from the gradient of the output; accumulates parameter gradients.
  virtual Tensor backward(const Tensor& grad_output, ActivationContext& ctx) = 0;
  // Appends this layer's parameters, children included, in a stable order.
  virtual void collect_parameters(std::vector<Parameter*>& out) { (void)out; }
  // Forward FLOPs per token on this rank (its shard) with sequences of `seq_len` tokens: by
  // default a multiply and an add per element of each matrix parameter, the GEMMs' share. A
  // layer with other work (attention over the keys), none (a table lookup) or children that
  // count themselves otherwise overrides it. The model's figure is the sum
  // (layers/model_facts.h); throughput and MFU are quoted against it.
  virtual double forward_flops_per_token(std::int64_t seq_len);

  const std::string& name() const { return name_; }
  std::vector<Parameter*> parameters() {
    std::vector<Parameter*> out;
    collect_parameters(out);
    return out;
  }

 private:
  std::string name_;
};

}  // namespace ternion
