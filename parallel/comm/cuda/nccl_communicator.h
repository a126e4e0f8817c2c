// The NCCL backend of Communicator: CUDA tensors on this process's device (one GPU per rank:
// NCCL refuses two ranks of one communicator on the same GPU, which is what the MPI backend's
// host staging is for). CPU tensors are refused; they go through MPI
// (device_routing_communicator.h routes each tensor to the right one).
//
// Streams (llm.c's pattern, framework/cuda/cuda_runtime.h): every operation first makes
// the communicator's stream wait for what the compute stream has enqueued so far (the kernels that
// wrote the inputs), enqueues the NCCL calls on that stream and records a completion event
// there. The returned Work:
//   is_completed()  queries the event; never blocks
//   wait()          blocks the host until the event has completed, checking meanwhile for
//                   NCCL's asynchronous errors and for the timeout; then makes the compute
//                   stream wait for the event (so later kernels see the result) and releases
//                   the buffers. On an error or timeout it aborts the NCCL communicator
//                   (ncclCommAbort) and throws CommError naming the operation, group and rank.
// Each Work keeps its tensors alive until the device is done with them; a Work dropped
// unwaited makes the compute stream wait for it first, so the caching allocator cannot hand
// its memory to later kernels while NCCL still uses it.
//
// The communicator is non-blocking (ncclConfig_t.blocking = 0), so neither its creation nor an
// operation that waits for a peer can hang the calling thread beyond the timeout:
// TERNION_NCCL_TIMEOUT_S seconds (default 600), counted from the call.
//
// Semantics as communicator.h, with NCCL's own rules on top:
//   - Each NcclCommunicator has a stream of its own (as c10d's process groups do); its
//     operations run there in call order, so one group's transfer waiting for a peer never
//     holds back another group's collective.
//   - Sends are deferred: send_async queues the send, and it is posted, in one NCCL group,
//     with this communicator's next receive or exchange, or when its Work is waited, asked
//     or dropped. NCCL point-to-point holds its stream until the peer posts the matching
//     operation, so two pipeline neighbours that each send and then receive (1F1B's steady
//     state) would block each other's streams; grouped with the receive, both pairs go out
//     together, as Megatron's batched send/receive does. Collectives do not post pending
//     sends. The cost: a send with no receive after it waits for its Work's wait().
//     So, unlike MPI, a group's point-to-point and its collectives must not interleave
//     across a step's sends and receives (a rank that sends, then joins a collective, while
//     its peer first waits for that send, deadlocks): the pipeline group carries only
//     point-to-point traffic of GPU tensors (its collectives are on CPU tensors, over MPI).
//   - Tags are checked (non-negative) but not used: NCCL matches a pair's messages in order.
//     A receive whose size differs from the send is not detected (the sizes must agree).
//   - Average is ncclAvg (integers: the sum divided, truncated).
//   - dtypes: reductions of f32, bf16, f16 and i32 (not u16); everything moves as bytes.
//   - reduce_scatter with chunks that do not divide evenly runs as one NCCL group of
//     reduces, one per rank's chunk; even chunks use ncclReduceScatter.
//   - split: ncclCommSplit (color < 0: not a member, null). split_node_local: the ranks whose
//     host name matches this rank's (gathered over NCCL).
//
// Only CUDA builds compile this (parallel/comm/cuda/); the header itself includes no CUDA or
// NCCL header.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/comm/communicator.h"

namespace ternion {

struct NcclCommState;  // the ncclComm_t, shared by the communicator and its Work handles

class NcclCommunicator final : public Communicator {
 public:
  // A communicator of the ranks of `bootstrap`, in its order. Collective over `bootstrap` (an
  // MPI communicator): its rank 0 makes the NCCL unique id and broadcasts it through
  // `bootstrap` as a CPU tensor; then every rank joins the NCCL communicator. The CUDA runtime
  // must be initialised first (cuda::initialize: this rank's device).
  static std::unique_ptr<NcclCommunicator> create(Communicator& bootstrap, std::string name);
  ~NcclCommunicator() override;  // never throws (see NcclCommState)

  int rank() const override;
  int size() const override;
  const std::string& name() const override;
  std::string backend_name() const override { return "nccl"; }

  WorkHandle all_reduce_async(Tensor& tensor, ReduceOp op) override;
  WorkHandle all_gather_async(Tensor& out, const Tensor& in) override;
  WorkHandle reduce_scatter_async(Tensor& out, const Tensor& in, ReduceOp op) override;
  WorkHandle broadcast_async(Tensor& tensor, int root) override;
  WorkHandle send_async(const Tensor& tensor, int peer, int tag = 0) override;
  WorkHandle recv_async(Tensor& tensor, int peer, int tag = 0) override;
  WorkHandle exchange_async(std::vector<P2POp> ops) override;
  WorkHandle barrier_async() override;
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override;
  std::unique_ptr<Communicator> split_node_local(const std::string& name) override;

  explicit NcclCommunicator(std::shared_ptr<NcclCommState> state);

 private:
  std::string context(std::string_view operation) const;
  void check_tensor(std::string_view operation, std::string_view role, const Tensor& t) const;
  WorkHandle point_to_point(std::string_view operation, std::vector<P2POp> ops);
  void check_point_to_point(std::string_view operation, const std::vector<P2POp>& ops) const;

  std::shared_ptr<NcclCommState> state_;
};

// TERNION_NCCL_TIMEOUT_S (whole seconds > 0), else 600 s. Throws ConfigError on a bad value.
std::chrono::seconds nccl_timeout_from_environment();

}  // namespace ternion
