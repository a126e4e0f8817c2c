// cuDNN fused attention (contract in cudnn_attention.h and kernels/attention.h).
//
// cuDNN sees Q, K, V, O and their gradients as [B, H, T, hs] tensors with explicit strides,
// so it reads our per-head [q | k | v] row layout in place, with no permute kernels:
//   Q, K, V: dims {B, H, T, hs}, strides {T * 3C, 3 hs, 3C, 1} at qkv + 0, hs, 2 hs
//            (C = H * hs; the same for dQ, dK, dV in dqkv)
//   O, dO:   dims {B, H, T, hs}, strides {T * C, hs, C, 1}
//   Stats:   dims {B, H, T, 1},  strides {H * T, T, 1, 1}  (our lse [B, H, T], F32)
// The attention scale 1 / sqrt(hs) is a constant of the graph; the causal mask is cuDNN's
// top-left-aligned diagonal band (key j <= query i).
#include "kernels/cuda/cudnn_attention.h"

#include "framework/features.h"

#if TN_HAVE_CUDNN_FRONTEND

// The frontend's JSON support (graph serialisation) is not used; skipping it skips a large
// header.
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/logging.h"
#include "kernels/attention.h"

namespace ternion::cuda {

namespace {

namespace fe = cudnn_frontend;

// Tensor uids of the graphs' variant packs.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

struct Problem {
  std::int64_t batch, seq, n_head, head_size;
  bool deterministic;  // the backward's algorithm (attention_deterministic())
  auto operator<=>(const Problem&) const = default;
};

Problem problem_of(const Tensor& qkv, std::int64_t n_head) {
  return {qkv.size(0), qkv.size(1), n_head, qkv.size(2) / (3 * n_head), attention_deterministic()};
}

// One handle for the process (as the cuBLAS handles), created on first use after the device
// was chosen, never destroyed (static destruction may run after the CUDA context is gone).
cudnnHandle_t cudnn_handle() {
  static cudnnHandle_t handle = [] {
    bind_this_thread();  // cudnnCreate takes the calling thread's current device
    cudnnHandle_t created = nullptr;
    TN_CUDNN_CHECK(cudnnCreate(&created));
    return created;
  }();
  TN_CUDNN_CHECK(cudnnSetStream(handle, compute_stream()));
  return handle;
}

std::vector<std::int64_t> qkv_strides(const Problem& p) {
  const std::int64_t c = p.n_head * p.head_size;
  return {p.seq * 3 * c, 3 * p.head_size, 3 * c, 1};
}
std::vector<std::int64_t> out_strides(const Problem& p) {
  const std::int64_t c = p.n_head * p.head_size;
  return {p.seq * c, p.head_size, c, 1};
}
std::vector<std::int64_t> head_dims(const Problem& p) {
  return {p.batch, p.n_head, p.seq, p.head_size};
}

std::shared_ptr<fe::graph::Tensor_attributes> tensor(fe::graph::Graph& graph, const char* name,
                                                     Uid uid, std::vector<std::int64_t> dims,
                                                     std::vector<std::int64_t> strides) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim(std::move(dims))
                          .set_stride(std::move(strides)));
}

std::vector<std::int64_t> stats_dims(const Problem& p) { return {p.batch, p.n_head, p.seq, 1}; }
std::vector<std::int64_t> stats_strides(const Problem& p) {
  return {p.n_head * p.seq, p.seq, 1, 1};
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

float attention_scale(const Problem& p) {
  return 1.0f / std::sqrt(static_cast<float>(p.head_size));
}

std::shared_ptr<fe::graph::Graph> forward_graph(const Problem& p) {
  auto graph = new_graph();
  auto q = tensor(*graph, "Q", kQ, head_dims(p), qkv_strides(p));
  auto k = tensor(*graph, "K", kK, head_dims(p), qkv_strides(p));
  auto v = tensor(*graph, "V", kV, head_dims(p), qkv_strides(p));
  auto options = fe::graph::SDPA_attributes()
                     .set_name("ternion_attention")
                     .set_generate_stats(true)
                     .set_attn_scale(attention_scale(p))
                     .set_causal_mask(true);
  auto [o, stats] = graph->sdpa(q, k, v, options);
  o->set_output(true).set_uid(kO).set_dim(head_dims(p)).set_stride(out_strides(p));
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim(stats_dims(p))
      .set_stride(stats_strides(p));
  return graph;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const Problem& p) {
  auto graph = new_graph();
  auto q = tensor(*graph, "Q", kQ, head_dims(p), qkv_strides(p));
  auto k = tensor(*graph, "K", kK, head_dims(p), qkv_strides(p));
  auto v = tensor(*graph, "V", kV, head_dims(p), qkv_strides(p));
  auto o = tensor(*graph, "O", kO, head_dims(p), out_strides(p));
  auto d_o = tensor(*graph, "dO", kDO, head_dims(p), out_strides(p));
  auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                 .set_name("Stats")
                                 .set_uid(kStats)
                                 .set_dim(stats_dims(p))
                                 .set_stride(stats_strides(p))
                                 .set_data_type(fe::DataType_t::FLOAT));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("ternion_attention_backward")
                     .set_attn_scale(attention_scale(p))
                     .set_causal_mask(true)
                     .set_deterministic_algorithm(p.deterministic);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, stats, options);
  dq->set_output(true).set_uid(kDQ).set_dim(head_dims(p)).set_stride(qkv_strides(p));
  dk->set_output(true).set_uid(kDK).set_dim(head_dims(p)).set_stride(qkv_strides(p));
  dv->set_output(true).set_uid(kDV).set_dim(head_dims(p)).set_stride(qkv_strides(p));
  return graph;
}

// The frontend's steps to an executable plan; an empty string when all succeeded, else the
// first failure's message.
std::string build(fe::graph::Graph& graph, const char* what) {
  const cudnnHandle_t handle = cudnn_handle();
  if (auto s = graph.validate(); s.is_bad())
    return std::string(what) + " validate: " + s.get_message();
  if (auto s = graph.build_operation_graph(handle); s.is_bad())
    return std::string(what) + " build_operation_graph: " + s.get_message();
  if (auto s = graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
      s.is_bad())
    return std::string(what) + " create_execution_plans: " + s.get_message();
  if (auto s = graph.check_support(); s.is_bad())
    return std::string(what) + " check_support: " + s.get_message();
  if (auto s = graph.build_plans(); s.is_bad())
    return std::string(what) + " build_plans: " + s.get_message();
  return {};
}

// One pass's executable graph, or why it cannot be had.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace = 0;
  std::string unsupported;  // why not, when the graph did not build
};

// Built on first use per (problem, pass) and kept, failures too, so an unsupported shape is
// asked once. The passes are built apart: an evaluation or a sampled window never pays for a
// backward graph, and a backward cuDNN cannot run falls back alone (the lse is shared).
const Plan& plan_for(const Problem& p, AttentionPass pass) {
  static std::mutex mutex;
  static std::map<std::pair<Problem, AttentionPass>, Plan> cache;
  std::lock_guard lock(mutex);
  auto found = cache.find({p, pass});
  if (found != cache.end()) return found->second;
  const bool forward = pass == AttentionPass::forward;
  const char* what = forward ? "forward" : "backward";
  Plan plan;
  plan.graph = forward ? forward_graph(p) : backward_graph(p);
  plan.unsupported = build(*plan.graph, what);
  if (plan.unsupported.empty()) {
    if (auto s = plan.graph->get_workspace_size(plan.workspace); s.is_bad())
      plan.unsupported = std::string(what) + " get_workspace_size: " + s.get_message();
  }
  if (plan.unsupported.empty()) {
    log_info("attention: cuDNN fused SDPA ", what, " for B=", p.batch, " T=", p.seq,
             " heads=", p.n_head, " head_size=", p.head_size,
             forward ? "" : p.deterministic ? ", deterministic" : ", non-deterministic",
             " (cuDNN ", cudnnGetVersion(), ")");
  } else {
    plan.graph.reset();
    plan.unsupported = "cuDNN cannot run the attention " + std::string(what) + " with B=" +
                       std::to_string(p.batch) + " T=" + std::to_string(p.seq) + " heads=" +
                       std::to_string(p.n_head) + " head_size=" + std::to_string(p.head_size) +
                       ": " + plan.unsupported;
  }
  return cache.emplace(std::pair{p, pass}, std::move(plan)).first->second;
}

void execute(const fe::graph::Graph& graph, std::int64_t workspace_bytes,
             std::unordered_map<std::int64_t, void*>& pack, const Device& device) {
  // Workspace from the caching allocator, freed after enqueueing: stream-ordered reuse on the
  // compute stream, where cuDNN runs.
  Tensor workspace = Tensor::empty({(workspace_bytes + 3) / 4}, DType::F32, device);
  void* workspace_ptr = workspace_bytes > 0 ? workspace.raw_data() : nullptr;
  fe::error_t status = graph.execute(cudnn_handle(), pack, workspace_ptr);
  TN_CHECK_AS(CudaError, status.is_good(), "cuDNN attention execute: ", status.get_message());
}

// A bf16 tensor's address `elements` in (Q, K and V are one qkv row's consecutive slices).
void* at(const Tensor& t, std::int64_t elements) {
  return static_cast<char*>(t.raw_data()) + elements * static_cast<std::int64_t>(sizeof(BFloat16));
}

}  // namespace

std::string cudnn_attention_unsupported_reason(const Tensor& qkv, std::int64_t n_head,
                                               AttentionPass pass,
                                               std::initializer_list<const Tensor*> operands) {
  if (qkv.dtype() != DType::BF16)
    return "cuDNN's fused attention runs bf16 only (qkv is " +
           std::string(dtype_name(qkv.dtype())) + ")";
  const Problem p = problem_of(qkv, n_head);
  if (p.head_size % 8 != 0)
    return "head size " + std::to_string(p.head_size) + " is not a multiple of 8";
  // cuDNN's execute refuses a device pointer off a 16-byte boundary; a fresh tensor starts a
  // cudaMalloc block, so only an offset view can be.
  auto misaligned = [](const Tensor& t) {
    return reinterpret_cast<std::uintptr_t>(t.raw_data()) % 16 != 0;
  };
  if (misaligned(qkv)) return "qkv " + qkv.str() + " does not start on a 16-byte boundary";
  for (const Tensor* t : operands)
    if (t != nullptr && misaligned(*t))
      return "an operand " + t->str() + " does not start on a 16-byte boundary";
  return plan_for(p, pass).unsupported;
}

void cudnn_attention_forward(Tensor& out, Tensor& lse, const Tensor& qkv, std::int64_t n_head) {
  const Problem p = problem_of(qkv, n_head);
  const Plan& plan = plan_for(p, AttentionPass::forward);
  TN_CHECK_AS(CudaError, plan.unsupported.empty(), plan.unsupported);
  std::unordered_map<std::int64_t, void*> pack = {{kQ, at(qkv, 0)},
                                                  {kK, at(qkv, p.head_size)},
                                                  {kV, at(qkv, 2 * p.head_size)},
                                                  {kO, at(out, 0)},
                                                  {kStats, lse.raw_data()}};
  execute(*plan.graph, plan.workspace, pack, qkv.device());
}

void cudnn_attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                              const Tensor& out, const Tensor& lse, std::int64_t n_head) {
  const Problem p = problem_of(qkv, n_head);
  const Plan& plan = plan_for(p, AttentionPass::backward);
  TN_CHECK_AS(CudaError, plan.unsupported.empty(), plan.unsupported);
  std::unordered_map<std::int64_t, void*> pack = {
      {kQ, at(qkv, 0)},
      {kK, at(qkv, p.head_size)},
      {kV, at(qkv, 2 * p.head_size)},
      {kO, at(out, 0)},
      {kDO, at(dout, 0)},
      {kStats, lse.raw_data()},
      {kDQ, at(dqkv, 0)},
      {kDK, at(dqkv, p.head_size)},
      {kDV, at(dqkv, 2 * p.head_size)}};
  execute(*plan.graph, plan.workspace, pack, qkv.device());
}

}  // namespace ternion::cuda

#else  // no cudnn-frontend in this build

#include "framework/error.h"

namespace ternion::cuda {

std::string cudnn_attention_unsupported_reason(const Tensor&, std::int64_t, AttentionPass,
                                               std::initializer_list<const Tensor*>) {
  return "this build has no cudnn-frontend (bash tools/install-deps.sh fetches it; then "
         "re-run cmake)";
}

void cudnn_attention_forward(Tensor&, Tensor&, const Tensor&, std::int64_t) {
  TN_THROW(CudaError, cudnn_attention_unsupported_reason(Tensor(), 0, AttentionPass::forward, {}));
}

void cudnn_attention_backward(Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              std::int64_t) {
  TN_THROW(CudaError, cudnn_attention_unsupported_reason(Tensor(), 0, AttentionPass::forward, {}));
}

}  // namespace ternion::cuda

#endif
