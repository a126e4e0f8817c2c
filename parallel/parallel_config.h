// The `parallel:` config section: how ranks are split and how a global batch is cut.
#pragma once

#include <cstdint>

#include <string>
#include <vector>

#include "framework/config_reader.h"
#include "parallel/comm/comm_backend.h"
#include "parallel/pipeline_schedule.h"

namespace ternion {

// The model sizes a layout must divide (parallel/ cannot see layers/model_config.h; the
// caller fills this from it).
struct ModelShardingShape {
  std::int64_t n_head = 1;
  std::int64_t n_kv_head = 0;            // key/value heads; 0 = n_head (no grouped-query)
  std::int64_t n_layer = 1;
  std::int64_t ff_width = 1;             // the MLP's hidden width
  bool ff_width_is_d_ff = false;         // model.d_ff set explicitly (else 4 x model.d_model)
  std::int64_t vocab_size = 1;
  std::int64_t vocab_pad_multiple = 1;
  std::int64_t padded_vocab_size = 1;
  std::int64_t seq_len = 1;
};

struct ParallelConfig {
  std::int64_t tensor = 1;            // tensor-parallel size (tp)
  std::int64_t pipeline = 1;          // pipeline-parallel size (pp)
  std::int64_t data = 1;              // data-parallel size (dp); 0 = world size / (tp * pp)
  std::int64_t micro_batch_size = 4;  // sequences per forward/backward pass
  bool sequence_parallel = false;     // Megatron's sequence parallelism within tensor groups
  std::int64_t virtual_stages = 1;    // model chunks per pipeline rank (> 1: interleaved 1F1B)
  std::string schedule = "1f1b";      // 1f1b | gpipe | zb-h1 (interleaved: virtual_stages > 1)
  double bucket_size_mb = 25.0;       // data-parallel gradient buckets
  bool overlap_grad_reduce = true;    // start a bucket's reduction as soon as it is ready
  std::int64_t zero_stage = 0;  // 1: optimizer state sharded over data ranks; 2: gradients too
  // How buckets travel (parallel/bucket_reduction.h): flat | hierarchical | auto (hierarchical
  // where the data group has the same number, two or more, of ranks on each of several nodes).
  std::string grad_reduce = "auto";
  std::string grad_reduce_dtype = "fp32";  // fp32 | bf16: what the gradients cross the wire as
  // none | powersgd (parallel/powersgd_reduction.h): low-rank compression with error feedback.
  std::string grad_compression = "none";
  std::int64_t powersgd_rank = 4;
  std::int64_t powersgd_start_step = 0;  // steps reduced uncompressed first
  // How CUDA tensors travel: nccl (default), or mpi staged through host memory (for several
  // ranks sharing one GPU, which NCCL refuses). CPU runs always use MPI, whatever this says,
  // so the default keeps every CPU run working. See parallel/comm/comm_backend.h.
  std::string backend = "nccl";
  // Seconds an operation may wait for its peers before the job is ended as hung
  // (parallel/comm/comm_watchdog.h). PyTorch's default: long enough for what other ranks
  // legitimately wait for (a first step's setup, a large checkpoint saved to a slow disk),
  // short against hours of a stuck allocation.
  std::int64_t comm_timeout_s = 600;

  template <class V>
  void visit(V& v) {
    v("tensor", tensor, "tensor-parallel ranks");
    v("pipeline", pipeline, "pipeline stages");
    v("data", data, "data-parallel replicas (0 = derive from the world size)");
    v("micro_batch_size", micro_batch_size, "sequences per micro-batch");
    v("sequence_parallel", sequence_parallel,
      "split LayerNorm and dropout regions along the sequence over the tensor group");
    v("virtual_stages", virtual_stages, "model chunks per pipeline rank (> 1: interleaved 1F1B)");
    v("schedule", schedule,
      "pipeline schedule: 1f1b | gpipe | zb-h1 (zero bubble: each backward split into its input "
      "and its weight gradients, the latter deferred into the bubbles); interleaved 1F1B with "
      "virtual_stages > 1");
    v("bucket_size_mb", bucket_size_mb, "data-parallel gradient bucket size in MB");
    v("overlap_grad_reduce", overlap_grad_reduce,
      "reduce each gradient bucket during backward, as soon as it is complete");
    v("zero_stage", zero_stage,
      "0; 1 for ZeRO-1 (optimizer state sharded over data ranks); 2 for ZeRO-2 (gradients "
      "too, reduce-scattered every micro-batch)");
    v("grad_reduce", grad_reduce,
      "data-parallel gradient reduction: flat | hierarchical (reduce-scatter inside each node, "
      "all-reduce across nodes, all-gather inside the node) | auto (hierarchical where the data "
      "group has two or more ranks on each of several nodes, evenly)");
    v("grad_reduce_dtype", grad_reduce_dtype,
      "what gradients cross the wire as: fp32 | bf16 (each contribution rounded once, summed in "
      "fp32 by its chunk's owner, the sum rounded once)");
    v("grad_compression", grad_compression,
      "gradient compression: none | powersgd (rank-r factors of each matrix gradient with error "
      "feedback, flat over the data group; not with ZeRO or a bf16 wire)");
    v("powersgd_rank", powersgd_rank, "the rank of PowerSGD's factors");
    v("powersgd_start_step", powersgd_start_step,
      "steps whose gradients are all-reduced uncompressed before PowerSGD starts (as PyTorch's "
      "start_powerSGD_iter)");
    v("backend", backend,
      "communication of GPU tensors: nccl | mpi (staged through host memory, for several ranks "
      "per GPU); CPU runs always use mpi");
    v("comm_timeout_s", comm_timeout_s,
      "seconds a communication may wait for its peers before the job ends as hung, each rank "
      "writing its flight record (logging.flight_dir) for ternion-hang-report");
  }

  // Checks the values and that tensor x pipeline x data is the job's `world_size` ranks (see
  // parallel/rank_layout.h), naming the key that is wrong.
  void validate(const ConfigDocument& doc, std::int64_t world_size) const;
  // The keys the rest of the section leaves unused (refused where given): PowerSGD's without
  // grad_compression: powersgd.
  std::vector<std::string> unused_keys() const;
  // Checks that the model shards over the layout: model.n_head and the MLP width are
  // multiples of parallel.tensor, so is the padded vocabulary (else it suggests a
  // model.vocab_pad_multiple), and there is at least one block per pipeline stage.
  void validate_model_fit(const ConfigDocument& doc, const ModelShardingShape& model) const;
  PipelineSchedule pipeline_schedule() const {
    if (virtual_stages > 1) return PipelineSchedule::Interleaved;
    if (schedule == "zb-h1") return PipelineSchedule::ZeroBubbleH1;
    return schedule == "gpipe" ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB;
  }
  // The backend for a run whose tensors are on a CUDA device (`cuda_tensors`) or the CPU.
  CommBackend comm_backend(bool cuda_tensors) const {
    return cuda_tensors ? parse_comm_backend(backend) : CommBackend::Mpi;
  }
  std::int64_t data_size(std::int64_t world_size) const {
    return data > 0 ? data : world_size / (tensor * pipeline);
  }
};

}  // namespace ternion
