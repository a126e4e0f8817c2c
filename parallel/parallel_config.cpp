#include "parallel/parallel_config.h"

#include <numeric>
#include <string>

#include "parallel/rank_layout.h"

namespace ternion {

namespace {

constexpr const char* kSection = "parallel";

// The key to blame when tensor x pipeline x data is not the world size: the model-parallel
// part when it cannot fit the world at all, else the data-parallel size.
const char* mismatched_key(std::int64_t world_size, std::int64_t tensor, std::int64_t pipeline) {
  if (world_size % tensor != 0) return "tensor";
  if (world_size / tensor % pipeline != 0) return "pipeline";
  return "data";
}

}  // namespace

void ParallelConfig::validate(const ConfigDocument& doc, std::int64_t world_size) const {
  TN_CHECK(world_size >= 1, "world size ", world_size);
  if (tensor < 1) config_fail(doc, kSection, "tensor", "must be at least 1");
  if (pipeline < 1) config_fail(doc, kSection, "pipeline", "must be at least 1");
  if (data < 0) config_fail(doc, kSection, "data", "must be at least 1 (or 0 to derive it)");
  if (micro_batch_size < 1) config_fail(doc, kSection, "micro_batch_size", "must be at least 1");
  if (!(bucket_size_mb > 0)) config_fail(doc, kSection, "bucket_size_mb", "must be positive");
  if (zero_stage < 0 || zero_stage > 2)
    config_fail(doc, kSection, "zero_stage",
                "must be 0, 1 or 2, got " + std::to_string(zero_stage));
  if (zero_stage == 2 && !overlap_grad_reduce)
    config_fail(doc, kSection, "overlap_grad_reduce",
                "must be true with zero_stage 2: ZeRO-2 reduces each bucket as the backward "
                "finishes it, which is what keeps its gradient memory at a shard");
  if (grad_reduce != "flat" && grad_reduce != "hierarchical" && grad_reduce != "auto")
    config_fail(doc, kSection, "grad_reduce",
                "must be flat, hierarchical or auto, got '" + grad_reduce + "'");
  if (grad_reduce_dtype != "fp32" && grad_reduce_dtype != "bf16")
    config_fail(doc, kSection, "grad_reduce_dtype",
                "must be fp32 or bf16, got '" + grad_reduce_dtype + "'");
  if (grad_compression != "none" && grad_compression != "powersgd")
    config_fail(doc, kSection, "grad_compression",
                "must be none or powersgd, got '" + grad_compression + "'");
  if (powersgd_rank < 1) config_fail(doc, kSection, "powersgd_rank", "must be at least 1");
  if (powersgd_start_step < 0)
    config_fail(doc, kSection, "powersgd_start_step", "must be 0 or more");
  refuse_unused_keys(doc, kSection, *this, unused_keys(),
                     "is a PowerSGD key: it needs parallel.grad_compression: powersgd");
  if (grad_compression == "powersgd") {
    if (zero_stage != 0)
      config_fail(doc, kSection, "grad_compression",
                  "powersgd needs parallel.zero_stage 0: it all-reduces whole buckets, where "
                  "ZeRO reduce-scatters them");
    if (grad_reduce_dtype != "fp32")
      config_fail(doc, kSection, "grad_compression",
                  "powersgd sends its factors in fp32: set parallel.grad_reduce_dtype to fp32");
    if (grad_reduce == "hierarchical")
      config_fail(doc, kSection, "grad_compression",
                  "powersgd reduces flat over the data group: set parallel.grad_reduce to auto "
                  "or flat");
  }
  if (comm_timeout_s < 1) config_fail(doc, kSection, "comm_timeout_s", "must be at least 1");
  if (backend != "nccl" && backend != "mpi")
    config_fail(doc, kSection, "backend", "must be nccl or mpi, got '" + backend + "'");
  try {
    make_rank_layout(world_size, tensor, pipeline, data);
  } catch (const ConfigError& e) {
    std::string message = e.what();
    const char* key = mismatched_key(world_size, tensor, pipeline);
    if (std::string(key) == "data" && data != 0)
      message += "; set parallel.data: " + std::to_string(world_size / (tensor * pipeline)) +
                 " (or 0 to derive it from the world size)";
    config_fail(doc, kSection, key, message);
  }
}

std::vector<std::string> ParallelConfig::unused_keys() const {
  if (grad_compression == "powersgd") return {};
  return {"powersgd_rank", "powersgd_start_step"};
}

void ParallelConfig::validate_model_fit(const ConfigDocument& doc,
                                        const ModelShardingShape& model) const {
  const std::string tp = std::to_string(tensor);
  if (model.n_head % tensor != 0)
    config_fail(doc, "model", "n_head",
                "n_head (" + std::to_string(model.n_head) +
                    ") is not a multiple of parallel.tensor (" + tp +
                    "): each tensor-parallel rank takes whole attention heads");
  if (model.n_kv_head > 0 && model.n_kv_head % tensor != 0)
    config_fail(doc, "model", "n_kv_head",
                "n_kv_head (" + std::to_string(model.n_kv_head) +
                    ") is not a multiple of parallel.tensor (" + tp +
                    "): each tensor-parallel rank takes whole key/value heads");
  if (model.ff_width % tensor != 0)
    config_fail(doc, "model", model.ff_width_is_d_ff ? "d_ff" : "d_model",
                "the MLP width (" + std::to_string(model.ff_width) +
                    ") is not a multiple of parallel.tensor (" + tp +
                    "): its hidden units are split evenly over the tensor-parallel ranks");
  if (model.padded_vocab_size % tensor != 0) {
    const std::int64_t multiple = std::lcm(model.vocab_pad_multiple, tensor);
    config_fail(doc, "model", "vocab_pad_multiple",
                "the padded vocabulary (model.vocab_size " + std::to_string(model.vocab_size) +
                    " rounded up to a multiple of " + std::to_string(model.vocab_pad_multiple) +
                    " = " + std::to_string(model.padded_vocab_size) +
                    ") is not a multiple of parallel.tensor (" + tp +
                    "); set model.vocab_pad_multiple: " + std::to_string(multiple) +
                    " (the least common multiple of " + std::to_string(model.vocab_pad_multiple) +
                    " and " + tp + ")");
  }
  if (sequence_parallel && model.seq_len % tensor != 0)
    config_fail(doc, kSection, "sequence_parallel",
                "needs model.seq_len (" + std::to_string(model.seq_len) +
                    ") to be a multiple of parallel.tensor (" + tp +
                    "): each tensor-parallel rank takes an equal share of the sequence");
  if (model.n_layer < pipeline)
    config_fail(doc, kSection, "pipeline",
                std::to_string(pipeline) + " pipeline stages need at least " +
                    std::to_string(pipeline) + " blocks, but model.n_layer is " +
                    std::to_string(model.n_layer));
}


}  // namespace ternion
