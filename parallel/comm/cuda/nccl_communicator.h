// The NCCL backend of Communicator: CUDA tensors on this process's device (one GPU per rank:
// NCCL refuses two ranks of one communicator on the same GPU, which is what the MPI backend's
// host staging is for). CPU tensors are refused; they go through MPI
// (device_routing_communicator.h routes each tensor to the right one).
//
// Streams (llm.c's pattern, framework/cuda/cuda_runtime.h): every operation first makes
// the communicator's stream wait for what the compute stream has enqueued so far (the kernels that
// wrote the inputs), enqueues the NCCL calls on that stream and records a completion event
// there. The returned Work behaves as a c10d ProcessGroupNCCL work does:
//   wait()          does not block the host: it makes the compute stream wait for the event
//                   (cudaStreamWaitEvent), so kernels enqueued after it see the result, and
//                   returns. Host code reading the result goes through a host copy
//                   (Tensor::copy_from / to(cpu)), which synchronises the compute stream.
//                   barrier() is the exception: its wait() blocks the host until every rank
//                   has joined (c10d's barrier does the same), since that is its purpose.
//   is_completed()  queries the event; never blocks.
// Both, and every operation, throw the communicator's recorded failure (below) if it has one.
//
// When a Work's tensors are released (each operation keeps its inputs and outputs referenced
// until one of these holds, whichever comes first):
//   (a) wait() has enqueued the compute stream's wait for the event. The caching allocator is
//       stream-ordered on the compute stream (framework/cuda/cuda_allocator.h): a block freed on
//       the host may be handed out at once, but its next owner's work is enqueued later, on the
//       compute stream, or on a communicator's stream that first waits for the compute stream;
//       both run after the compute stream's wait, so after the operation.
//   (b) the host has seen the event complete (the watchdog or is_completed): the device is done.
// Nothing else releases them; in particular not a failure: an aborted operation's tensors are
// released only once its event completes (the aborted kernels exit, then it fires), and those
// of an operation whose event never completes are never returned to the allocator (leaked; the
// process is failing anyway). A Work dropped unwaited is safe: the communicator's list of
// outstanding operations keeps its tensors until (b), and no stream is made to wait for it.
//
// The watchdog: one thread per communicator (c10d's choice too: its lifetime is the
// communicator's, no process-wide registry is needed, and a watchdog stuck inside one
// communicator's ncclCommAbort, which NCCL's issues report can block, cannot stop the others
// from being watched). Every 10 ms while operations are outstanding (every second otherwise)
// it looks at them, oldest first (one stream: they complete in order): releases those whose
// event has completed (cudaEventQuery), reads ncclCommGetAsyncError, and checks the oldest
// one's deadline, parallel.comm_timeout_s seconds (default 600) after it was enqueued. On an
// asynchronous error, a failed event or a timeout it records a CommError message naming the
// operation, the group, the rank and the cause, prints it to stderr once, and aborts the NCCL
// communicator (ncclCommAbort): NCCL's kernels of this communicator exit, so a host thread
// blocked in a device synchronisation is released (with garbage in the results: see
// check_nccl_health). From then on every call into the communicator (any operation, wait,
// is_completed) throws that CommError, so the trainer's normal error path runs.
//
// The communicator is non-blocking (ncclConfig_t.blocking = 0), so neither its creation nor
// the enqueueing of an operation that needs a peer can hang the calling thread beyond the
// timeout (the calling thread polls those itself, with the same timeout).
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
// Threads: a communicator and its Works are used from one thread (the rank's main thread);
// only its watchdog runs beside it, and every NCCL call on the communicator from either is
// made under one mutex (the .cpp says why that is enough).
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

struct NcclCommState;  // the communicator's stream, handle and watchdog, shared with its Works

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

// TERNION_NCCL_TIMEOUT_S (whole seconds > 0; for tests), else parallel.comm_timeout_s
// (parallel/comm/comm_watchdog.h, 600 s unless configured). ConfigError on a bad value.
std::chrono::seconds nccl_timeout_from_environment();

// Throws (CommError) the first NCCL failure this process has recorded, on any communicator
// (the watchdog's or one a call ran into); returns at once if there is none (one atomic load).
// For host code that has just synchronised with the device and is about to use what it read:
// after an abort the device synchronisation returns, but the results of the aborted
// operations, and of everything computed from them, are garbage. The trainer should call it
// after each step's device synchronisation (before the step's metrics are logged or acted on)
// and before writing a checkpoint. A failure while creating a communicator is not recorded
// here: the creating call throws it.
void check_nccl_health();

}  // namespace ternion
