// The MPI backend of Communicator: every operation asynchronous, on CPU tensors and (staged
// through host memory) CUDA tensors.
//
// Each call checks its arguments on the calling thread (throwing CommError at once), then
// hands the operation to the process's one MPI progress thread (mpi_progress_engine.h), which
// starts it with the non-blocking MPI call (MPI_Iallreduce, MPI_Iallgather,
// MPI_Ireduce_scatter, MPI_Ibcast, MPI_Isend / MPI_Irecv, MPI_Ibarrier) and completes the
// returned Work when MPI reports it done. Failures inside MPI surface from Work::wait() as a
// CommError naming the operation, the group, the rank and MPI's error string. Such a failure
// (other than a truncated receive) breaks the communicator: every later operation on it,
// split and duplicate included, fails with that first CommError without calling MPI.
//
// Element types: f32 -> MPI_FLOAT, i32 -> MPI_INT32_T, u16 -> MPI_UINT16_T; bf16 and f16
// move as 2-byte words (MPI_UINT16_T). MPI has no bfloat16 arithmetic, so bf16 Sum and Max are
// user-defined MPI operations (MPI_Op_create) on those words: each combining step widens both
// elements to f32, combines them and rounds back to bf16 (ties to even), the rounding NCCL's
// bf16 reductions do, with 2 bytes per element on the wire like NCCL. f16 cannot be reduced.
// Average is a Sum followed by a division by the group size on the progress thread; for
// integer types that division truncates toward zero, for bf16 it rounds once more.
//
// Tensors on a device (CUDA: `parallel.backend: mpi` on GPUs, e.g. several ranks sharing one
// GPU, which NCCL refuses) are staged through host memory (parallel/comm/host_staging.h): the
// call copies inputs to host buffers (synchronising with the kernels that wrote them), MPI works
// on those, and wait() (or is_completed() once it answers true) copies outputs back to the
// device on the calling thread. The progress thread never makes a CUDA call. The device result
// is therefore in place only after wait(), where a CPU result is as soon as MPI is done.
//
// all_gather may run in place: `in` may be exactly out's chunk `rank` (MPI_IN_PLACE); any
// other overlap of `in` and `out` is refused, as is any overlap in reduce_scatter.
//
// split, split_node_local and the world communicator's creation are collective over the
// group (every member calls them, in the same order as its other collectives). They block the
// progress thread until every member has joined, so a rank must not wait for some other
// operation of its peers before calling them.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/comm/flight_recorder.h"

namespace ternion {

class MpiOperation;  // parallel/comm/mpi_progress_engine.h
class MpiGroupState;

struct MpiCommunicatorOptions {
  // Tests: send CPU tensors through the host-staging path too (copies in and back), so that
  // the path CUDA tensors take runs in CPU-only builds. Inherited by split communicators.
  bool stage_cpu_tensors = false;
};

class MpiCommunicator final : public Communicator {
 public:
  using Options = MpiCommunicatorOptions;

  // Takes ownership of `comm` (freed by the destructor) and sets MPI_ERRORS_RETURN on it.
  MpiCommunicator(MPI_Comm comm, std::string name, Options options = {});
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  std::string backend_name() const override { return "mpi"; }

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
  // The same ranks in a communicator of their own (MPI_Comm_dup), with other options.
  // Collective like split.
  std::unique_ptr<MpiCommunicator> duplicate(const std::string& name, Options options);

 private:
  // "all_reduce on group 'world' (rank 1 of 4)", plus the world rank in a sub-group.
  std::string context(std::string_view operation) const;
  // Checks a tensor every operation takes: defined, contiguous, int-countable.
  void check_tensor(std::string_view operation, std::string_view role, const Tensor& t) const;
  void check_reducible(std::string_view operation, const Tensor& t) const;
  // `which` prefixes the message ("ops[2]: ") when a batch holds several operations.
  void check_peer(std::string_view operation, std::string_view which, int peer, int tag) const;
  WorkHandle point_to_point(std::string_view operation, std::vector<P2POp> ops);
  // Records `operation` in the flight recorder (numbered in `sequence`, as `kind`, moving
  // `bytes`, with the group's ranks `peers`) and hands it to the progress engine.
  WorkHandle submit(std::unique_ptr<MpiOperation> operation, FlightSequence sequence,
                    std::string_view kind, std::int64_t bytes, const std::vector<int>& peers = {});
  std::uint64_t record_call(std::string_view kind);  // a funnelled call (split, ...)

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  int world_rank_ = 0;
  int tag_upper_bound_ = 32767;  // MPI_TAG_UB; the standard guarantees at least this
  // Its operations not yet ended, and whether one broke it (mpi_progress_engine.h).
  std::shared_ptr<MpiGroupState> state_;
  Options options_;
  std::vector<int> members_;     // world ranks, in group-rank order
  int flight_group_ = -1;        // this group in the flight recorder
};

}  // namespace ternion
