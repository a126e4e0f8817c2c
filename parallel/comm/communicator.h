// The one communicator interface all parallel code talks through (modelled on c10d's
// Backend). A Communicator is a group of ranks; every collective is called by all of them in
// the same order. Each operation has an asynchronous form returning a WorkHandle and a
// blocking form (the same, then wait()).
//
// Tensors are contiguous; the MPI backend takes CPU tensors, the NCCL backend GPU tensors.
// Buffers must stay alive and untouched until the work completes.
//
//   all_reduce(t, op)            t = op over ranks of t                  (in place)
//   all_gather(out, in)          out = concat over ranks of in           out.numel = size *
//   in.numel reduce_scatter(out, in, op)  out = chunk `rank` of (op over ranks of in), chunks as
//                                chunk_range(in.numel, size, rank): sizes that do not divide
//                                evenly give the first ranks one element more
//   broadcast(t, root)           t = root's t
//   send(t, peer, tag) / recv(t, peer, tag)       point to point, ranks within this group
//   exchange(ops)                a batch of sends and receives started together and completed
//                                together, so neighbours can swap in any order without deadlock
//   barrier()
//   split(color, key)            a sub-communicator of the ranks with the same color, ordered
//                                by key (MPI_Comm_split); color < 0: not a member (returns null)
//   split_node_local()           the ranks on this rank's node (MPI_Comm_split_type shared)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/tensor.h"
#include "parallel/comm/work.h"

namespace ternion {

enum class ReduceOp { Sum, Average, Max };

struct P2POp {
  enum class Kind { Send, Recv } kind;
  Tensor tensor;
  int peer = 0;
  int tag = 0;
};

// Element range [begin, end) of chunk `index` when `n` elements are split into `parts`.
struct ChunkRange {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
};
ChunkRange chunk_range(std::int64_t n, std::int64_t parts, std::int64_t index);

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A name for messages: "world", "tp[0,1]", ...
  virtual const std::string& name() const = 0;
  virtual std::string backend_name() const = 0;  // "mpi", "nccl"

  virtual WorkHandle all_reduce_async(Tensor& tensor, ReduceOp op) = 0;
  virtual WorkHandle all_gather_async(Tensor& out, const Tensor& in) = 0;
  virtual WorkHandle reduce_scatter_async(Tensor& out, const Tensor& in, ReduceOp op) = 0;
  virtual WorkHandle broadcast_async(Tensor& tensor, int root) = 0;
  virtual WorkHandle send_async(const Tensor& tensor, int peer, int tag = 0) = 0;
  virtual WorkHandle recv_async(Tensor& tensor, int peer, int tag = 0) = 0;
  virtual WorkHandle exchange_async(std::vector<P2POp> ops) = 0;
  virtual WorkHandle barrier_async() = 0;
  virtual std::unique_ptr<Communicator> split(int color, int key, const std::string& name) = 0;
  // The ranks of this group that share this rank's node (shared memory), ordered by rank.
  virtual std::unique_ptr<Communicator> split_node_local(const std::string& name) = 0;

  // Blocking forms.
  void all_reduce(Tensor& tensor, ReduceOp op) { all_reduce_async(tensor, op)->wait(); }
  void all_gather(Tensor& out, const Tensor& in) { all_gather_async(out, in)->wait(); }
  void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) {
    reduce_scatter_async(out, in, op)->wait();
  }
  void broadcast(Tensor& tensor, int root) { broadcast_async(tensor, root)->wait(); }
  void send(const Tensor& tensor, int peer, int tag = 0) { send_async(tensor, peer, tag)->wait(); }
  void recv(Tensor& tensor, int peer, int tag = 0) { recv_async(tensor, peer, tag)->wait(); }
  void exchange(std::vector<P2POp> ops) { exchange_async(std::move(ops))->wait(); }
  void barrier() { barrier_async()->wait(); }

 protected:
  Communicator() = default;
};

}  // namespace ternion
