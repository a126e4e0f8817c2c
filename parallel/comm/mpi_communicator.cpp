#include "parallel/comm/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "framework/bfloat16.h"
#include "framework/error.h"
#include "parallel/comm/fault_injection.h"
#include "parallel/comm/flight_recorder.h"
#include "parallel/comm/host_staging.h"
#include "parallel/comm/mpi_check.h"
#include "parallel/comm/mpi_progress_engine.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion {

namespace {

// bf16 and f16 travel as 2-byte words: only reductions need MPI to know what they are.
MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::F32: return MPI_FLOAT;
    case DType::I32: return MPI_INT32_T;
    case DType::U16:
    case DType::BF16:
    case DType::F16: return MPI_UINT16_T;
  }
  TN_THROW(InternalError, "no MPI datatype for dtype ", static_cast<int>(dtype));
}

// MPI_User_function for bf16 Sum and Max: inout[i] = in[i] (op) inout[i], each pair widened to
// f32 and the result rounded back to bf16. Called by MPI (on the progress thread) with the
// 2-byte words the bf16 tensors travel as.
template <class Combine>
void combine_bf16(void* in, void* inout, int* count, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const BFloat16*>(in);
  auto* b = static_cast<BFloat16*>(inout);
  for (int i = 0; i < *count; ++i)
    b[i] = float_to_bf16(Combine{}(bf16_to_float(a[i]), bf16_to_float(b[i])));
}
struct AddFloats {
  float operator()(float x, float y) const { return x + y; }
};
struct MaxOfFloats {  // a NaN on either side wins, as in NCCL's max
  float operator()(float x, float y) const { return x > y || std::isnan(x) ? x : y; }
};

// Created on first use; only the progress thread calls this (it is the one thread that calls
// MPI). MPI_Finalize frees them. Commutative: the order MPI combines ranks in may differ.
MPI_Op bf16_mpi_op(ReduceOp op) {
  static const MPI_Op sum = [] {
    MPI_Op created = MPI_OP_NULL;
    TN_MPI_CHECK(MPI_Op_create(&combine_bf16<AddFloats>, /*commute=*/1, &created),
                 "creating the bf16 sum MPI operation");
    return created;
  }();
  static const MPI_Op max = [] {
    MPI_Op created = MPI_OP_NULL;
    TN_MPI_CHECK(MPI_Op_create(&combine_bf16<MaxOfFloats>, /*commute=*/1, &created),
                 "creating the bf16 max MPI operation");
    return created;
  }();
  return op == ReduceOp::Max ? max : sum;
}

MPI_Op mpi_op(ReduceOp op, DType dtype) {
  if (dtype == DType::BF16) return bf16_mpi_op(op);
  return op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
}

int mpi_count(const Tensor& t) { return static_cast<int>(t.numel()); }

template <class T>
void divide_elements(const Tensor& t, int divisor) {
  T* values = static_cast<T*>(t.raw_data());
  for (std::int64_t i = 0; i < t.numel(); ++i) values[i] = static_cast<T>(values[i] / divisor);
}

// Average = Sum / group size, done once the Sum has arrived.
void divide_by_group_size(const Tensor& t, int size) {
  if (t.numel() == 0) return;
  switch (t.dtype()) {
    case DType::F32: divide_elements<float>(t, size); return;
    case DType::I32: divide_elements<std::int32_t>(t, size); return;
    case DType::U16: divide_elements<std::uint16_t>(t, size); return;
    case DType::BF16: {
      auto* values = static_cast<BFloat16*>(t.raw_data());
      for (std::int64_t i = 0; i < t.numel(); ++i)
        values[i] = float_to_bf16(bf16_to_float(values[i]) / static_cast<float>(size));
      return;
    }
    case DType::F16: break;
  }
  TN_THROW(InternalError, "average of ", dtype_name(t.dtype()), " reached the progress thread");
}

bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto a_begin = reinterpret_cast<std::uintptr_t>(a.raw_data());
  const auto b_begin = reinterpret_cast<std::uintptr_t>(b.raw_data());
  return a_begin < b_begin + b.nbytes() && b_begin < a_begin + a.nbytes();
}

// What every operation on a communicator carries: where it runs and how to name it.
class CommOperation : public MpiOperation {
 public:
  CommOperation(std::string context, MPI_Comm comm) : context_(std::move(context)), comm_(comm) {}
  std::string describe() const override { return context_; }

 protected:
  std::string context_;
  MPI_Comm comm_;
};

class AllReduceOperation final : public CommOperation {
 public:
  AllReduceOperation(std::string context, MPI_Comm comm, Tensor tensor, ReduceOp op, int size)
      : CommOperation(std::move(context), comm), tensor_(std::move(tensor)), op_(op), size_(size) {}

  void start(std::vector<MPI_Request>& requests) override {
    MPI_Request request;
    TN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, tensor_.raw_data(), mpi_count(tensor_),
                                mpi_datatype(tensor_.dtype()), mpi_op(op_, tensor_.dtype()), comm_,
                                &request),
                 context_);
    requests.push_back(request);
  }
  void finish() override {
    if (op_ == ReduceOp::Average) divide_by_group_size(tensor_, size_);
  }

 private:
  Tensor tensor_;
  ReduceOp op_;
  int size_;
};

class AllGatherOperation final : public CommOperation {
 public:
  AllGatherOperation(std::string context, MPI_Comm comm, Tensor out, Tensor in, bool in_place)
      : CommOperation(std::move(context), comm),
        out_(std::move(out)),
        in_(std::move(in)),
        in_place_(in_place) {}

  void start(std::vector<MPI_Request>& requests) override {
    const MPI_Datatype type = mpi_datatype(in_.dtype());
    MPI_Request request;
    TN_MPI_CHECK(MPI_Iallgather(in_place_ ? MPI_IN_PLACE : in_.raw_data(), mpi_count(in_), type,
                                out_.raw_data(), mpi_count(in_), type, comm_, &request),
                 context_);
    requests.push_back(request);
  }

 private:
  Tensor out_, in_;
  bool in_place_;
};

class ReduceScatterOperation final : public CommOperation {
 public:
  ReduceScatterOperation(std::string context, MPI_Comm comm, Tensor out, Tensor in, ReduceOp op,
                         std::vector<int> counts)
      : CommOperation(std::move(context), comm),
        out_(std::move(out)),
        in_(std::move(in)),
        op_(op),
        counts_(std::move(counts)) {}

  void start(std::vector<MPI_Request>& requests) override {
    // counts_ lives in this operation: MPI reads it until the request completes.
    MPI_Request request;
    TN_MPI_CHECK(MPI_Ireduce_scatter(in_.raw_data(), out_.raw_data(), counts_.data(),
                                     mpi_datatype(in_.dtype()), mpi_op(op_, in_.dtype()), comm_,
                                     &request),
                 context_);
    requests.push_back(request);
  }
  void finish() override {
    if (op_ == ReduceOp::Average) divide_by_group_size(out_, static_cast<int>(counts_.size()));
  }

 private:
  Tensor out_, in_;
  ReduceOp op_;
  std::vector<int> counts_;
};

class BroadcastOperation final : public CommOperation {
 public:
  BroadcastOperation(std::string context, MPI_Comm comm, Tensor tensor, int root)
      : CommOperation(std::move(context), comm), tensor_(std::move(tensor)), root_(root) {}

  void start(std::vector<MPI_Request>& requests) override {
    MPI_Request request;
    TN_MPI_CHECK(MPI_Ibcast(tensor_.raw_data(), mpi_count(tensor_), mpi_datatype(tensor_.dtype()),
                            root_, comm_, &request),
                 context_);
    requests.push_back(request);
  }

 private:
  Tensor tensor_;
  int root_;
};

class BarrierOperation final : public CommOperation {
 public:
  using CommOperation::CommOperation;
  void start(std::vector<MPI_Request>& requests) override {
    MPI_Request request;
    TN_MPI_CHECK(MPI_Ibarrier(comm_, &request), context_);
    requests.push_back(request);
  }
};

// send, recv and exchange: every send and receive of the batch is started at once, so the
// order in which neighbours issue them cannot deadlock.
class PointToPointOperation final : public CommOperation {
 public:
  PointToPointOperation(std::string context, MPI_Comm comm, std::vector<P2POp> ops)
      : CommOperation(std::move(context), comm), ops_(std::move(ops)) {}

  void start(std::vector<MPI_Request>& requests) override {
    for (const P2POp& op : ops_) {
      MPI_Request request;
      const MPI_Datatype type = mpi_datatype(op.tensor.dtype());
      if (op.kind == P2POp::Kind::Recv) {
        TN_MPI_CHECK(MPI_Irecv(op.tensor.raw_data(), mpi_count(op.tensor), type, op.peer, op.tag,
                               comm_, &request),
                     context_);
      } else {
        TN_MPI_CHECK(MPI_Isend(op.tensor.raw_data(), mpi_count(op.tensor), type, op.peer, op.tag,
                               comm_, &request),
                     context_);
      }
      requests.push_back(request);
    }
  }

  bool is_point_to_point() const override { return true; }
  std::string describe_request(std::size_t index) const override {
    const P2POp& op = ops_[index];
    const bool recv = op.kind == P2POp::Kind::Recv;
    return detail::concat(context_, ": ", recv ? "receiving " : "sending ", op.tensor.str(),
                          recv ? " from" : " to", " rank ", op.peer, " (tag ", op.tag, ")");
  }

  // A shorter message than the buffer is not an MPI error, but it is ours: the two sides
  // disagree about the shape.
  void request_done(std::size_t index, const MPI_Status& status) override {
    const P2POp& op = ops_[index];
    if (op.kind != P2POp::Kind::Recv) return;
    int received = 0;
    MPI_Status copy = status;
    TN_MPI_CHECK(MPI_Get_count(&copy, mpi_datatype(op.tensor.dtype()), &received), context_);
    TN_CHECK_AS(CommError, received == mpi_count(op.tensor), context_, ": received ", received,
                " elements from rank ", op.peer, " (tag ", op.tag, ") into ", op.tensor.str(),
                ", which expects ", op.tensor.numel());
  }

 private:
  std::vector<P2POp> ops_;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, Options options)
    : comm_(comm),
      name_(std::move(name)),
      world_rank_(MpiRuntime::world_rank()),
      state_(std::make_shared<MpiGroupState>()),
      options_(options) {
  TN_CHECK(comm_ != MPI_COMM_NULL, "an MpiCommunicator needs a communicator, not MPI_COMM_NULL");
  const std::string where =
      detail::concat("creating communicator '", name_, "' (world rank ", world_rank_, ")");
  MpiProgressEngine& engine = MpiProgressEngine::instance();
  try {
    engine.run([&] {
      TN_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), where);
      TN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_), where);
      TN_MPI_CHECK(MPI_Comm_size(comm_, &size_), where);
      void* tag_ub = nullptr;
      int found = 0;
      TN_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found), where);
      if (found) tag_upper_bound_ = *static_cast<int*>(tag_ub);
      // The members' world ranks, for the flight record.
      MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
      TN_MPI_CHECK(MPI_Comm_group(comm_, &group), where);
      TN_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world), where);
      std::vector<int> ranks(static_cast<std::size_t>(size_));
      for (int r = 0; r < size_; ++r) ranks[static_cast<std::size_t>(r)] = r;
      members_.resize(ranks.size());
      TN_MPI_CHECK(MPI_Group_translate_ranks(group, size_, ranks.data(), world, members_.data()),
                   where);
      MPI_Group_free(&group);
      MPI_Group_free(&world);
    });
  } catch (...) {
    engine.run([&] { MPI_Comm_free(&comm_); });  // the destructor will not run
    throw;
  }
  flight_group_ = FlightRecorder::instance().register_group(name_, members_);
}

namespace {

// The operation TERNION_INJECT_COMM_ERROR picked (parallel/comm/fault_injection.h): it fails
// where MPI would report an error, when the progress thread starts it.
class InjectedFailure final : public MpiOperation {
 public:
  explicit InjectedFailure(std::unique_ptr<MpiOperation> operation)
      : operation_(std::move(operation)) {}
  std::string describe() const override { return operation_->describe(); }
  void start(std::vector<MPI_Request>&) override {
    throw CommError(describe() + ": failed (injected by " + kInjectCommErrorVariable + ")");
  }

 private:
  std::unique_ptr<MpiOperation> operation_;
};

}  // namespace

WorkHandle MpiCommunicator::submit(std::unique_ptr<MpiOperation> operation, FlightSequence sequence,
                                   std::string_view kind, std::int64_t bytes,
                                   const std::vector<int>& peers) {
  if (inject_comm_error(world_rank_, kind))
    operation = std::make_unique<InjectedFailure>(std::move(operation));
  operation->count_on(state_);
  std::vector<int> world_peers;
  for (int peer : peers) world_peers.push_back(members_[static_cast<std::size_t>(peer)]);
  operation->flight_id = FlightRecorder::instance().issued(flight_group_, sequence,
                                                           std::string(kind), bytes, world_peers);
  return MpiProgressEngine::instance().submit(std::move(operation));
}

std::uint64_t MpiCommunicator::record_call(std::string_view kind) {
  return FlightRecorder::instance().issued(flight_group_, FlightSequence::collective,
                                           std::string(kind), 0, {});
}

MpiCommunicator::~MpiCommunicator() {
  // After MPI_Finalize there is nothing left to free (and no MPI call is allowed).
  if (comm_ == MPI_COMM_NULL || !MpiRuntime::initialized()) return;
  // Operations still in flight (an error unwinding past them, a peer that never joined, as the
  // job ends): freeing the communicator under them crashes Open MPI's progress (seen in its
  // non-blocking collectives). It is left to MPI_Finalize, or to the job's end; so is a broken
  // one, whose peers may still be inside a collective this rank never joined.
  if (state_->unfinished.load(std::memory_order_acquire) > 0 || state_->broken()) return;
  try {
    MpiProgressEngine::instance().run(
        [this] { TN_MPI_CHECK(MPI_Comm_free(&comm_), context("freeing the communicator")); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ternion: rank %d: %s\n", world_rank_, e.what());
  }
}

std::string MpiCommunicator::context(std::string_view operation) const {
  std::string out =
      detail::concat(operation, " on group '", name_, "' (rank ", rank_, " of ", size_);
  if (rank_ != world_rank_ || size_ != MpiRuntime::world_size())
    out += detail::concat(", world rank ", world_rank_);
  return out + ")";
}

void MpiCommunicator::check_tensor(std::string_view operation, std::string_view role,
                                   const Tensor& t) const {
  TN_CHECK_AS(CommError, t.defined(), context(operation), ": ", role, " is an undefined tensor");
  TN_CHECK_AS(CommError, t.is_contiguous(), context(operation), ": ", role,
              " must be contiguous; it is a strided view ", t.str(), " (use .contiguous())");
  TN_CHECK_AS(CommError, t.numel() <= INT_MAX, context(operation), ": ", role, " has ", t.numel(),
              " elements, more than one MPI call can count (2^31 - 1)");
}

void MpiCommunicator::check_reducible(std::string_view operation, const Tensor& t) const {
  TN_CHECK_AS(CommError, t.dtype() != DType::F16, context(operation),
              ": the MPI backend cannot reduce ", dtype_name(t.dtype()),
              " (MPI has no arithmetic for it); reduce an f32 or bf16 copy");
}

void MpiCommunicator::check_peer(std::string_view operation, std::string_view which, int peer,
                                 int tag) const {
  TN_CHECK_AS(CommError, peer >= 0 && peer < size_, context(operation), ": ", which, "peer ", peer,
              " is out of range for a group of ", size_, " ranks");
  TN_CHECK_AS(CommError, tag >= 0 && tag <= tag_upper_bound_, context(operation), ": ", which,
              "tag ", tag, " is outside [0, ", tag_upper_bound_, "]");
}

WorkHandle MpiCommunicator::all_reduce_async(Tensor& tensor, ReduceOp op) {
  constexpr std::string_view kOperation = "all_reduce";
  check_tensor(kOperation, "tensor", tensor);
  check_reducible(kOperation, tensor);
  HostStaging staging(options_.stage_cpu_tensors);
  Tensor host = staging.stage(tensor, /*copy_in=*/true, /*copy_back=*/true);
  return staging.wrap(
      submit(std::make_unique<AllReduceOperation>(context(kOperation), comm_, host, op, size_),
             FlightSequence::collective, kOperation, static_cast<std::int64_t>(tensor.nbytes())));
}

WorkHandle MpiCommunicator::all_gather_async(Tensor& out, const Tensor& in) {
  constexpr std::string_view kOperation = "all_gather";
  check_tensor(kOperation, "out", out);
  check_tensor(kOperation, "in", in);
  TN_CHECK_AS(CommError, out.dtype() == in.dtype(), context(kOperation), ": out is ",
              dtype_name(out.dtype()), " but in is ", dtype_name(in.dtype()));
  TN_CHECK_AS(CommError, out.numel() == size_ * in.numel(), context(kOperation), ": out has ",
              out.numel(), " elements; it must hold group size x in = ", size_, " x ", in.numel(),
              " = ", size_ * in.numel());
  // In place when `in` is already where this rank's chunk of `out` goes.
  const bool in_place =
      in.numel() > 0 && in.raw_data() == static_cast<char*>(out.raw_data()) +
                                             static_cast<std::size_t>(rank_) * in.nbytes();
  TN_CHECK_AS(CommError, in_place || !overlaps(out, in), context(kOperation),
              ": in overlaps out without being exactly out's chunk ", rank_);
  HostStaging staging(options_.stage_cpu_tensors);
  Tensor host_out = out, host_in = in;
  if (staging.needs_staging(out) || staging.needs_staging(in)) {
    host_out = Tensor::empty(out.shape(), out.dtype(), Device::cpu());
    staging.copy_back_later(out, host_out);
    // In place stays in place: the host input is the host output's chunk `rank`.
    host_in = in_place ? host_out.view({out.numel()}).slice(0, rank_ * in.numel(), in.numel())
                             .view(in.shape())
                       : Tensor::empty(in.shape(), in.dtype(), Device::cpu());
    host_in.copy_from(in);
  }
  return staging.wrap(submit(
      std::make_unique<AllGatherOperation>(context(kOperation), comm_, host_out, host_in, in_place),
      FlightSequence::collective, kOperation, static_cast<std::int64_t>(out.nbytes())));
}

WorkHandle MpiCommunicator::reduce_scatter_async(Tensor& out, const Tensor& in, ReduceOp op) {
  constexpr std::string_view kOperation = "reduce_scatter";
  check_tensor(kOperation, "out", out);
  check_tensor(kOperation, "in", in);
  check_reducible(kOperation, in);
  TN_CHECK_AS(CommError, out.dtype() == in.dtype(), context(kOperation), ": out is ",
              dtype_name(out.dtype()), " but in is ", dtype_name(in.dtype()));
  std::vector<int> counts(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r)
    counts[static_cast<std::size_t>(r)] =
        static_cast<int>(chunk_range(in.numel(), size_, r).size());
  const int expected = counts[static_cast<std::size_t>(rank_)];
  TN_CHECK_AS(CommError, out.numel() == expected, context(kOperation), ": out has ", out.numel(),
              " elements, but chunk ", rank_, " of in's ", in.numel(), " elements over ", size_,
              " ranks has ", expected);
  TN_CHECK_AS(CommError, !overlaps(out, in), context(kOperation),
              ": out overlaps in (reduce_scatter does not run in place)");
  HostStaging staging(options_.stage_cpu_tensors);
  Tensor host_in = staging.stage(in, /*copy_in=*/true, /*copy_back=*/false);
  Tensor host_out = staging.stage(out, /*copy_in=*/false, /*copy_back=*/true);
  return staging.wrap(
      submit(std::make_unique<ReduceScatterOperation>(context(kOperation), comm_, host_out, host_in,
                                                      op, std::move(counts)),
             FlightSequence::collective, kOperation, static_cast<std::int64_t>(in.nbytes())));
}

WorkHandle MpiCommunicator::broadcast_async(Tensor& tensor, int root) {
  constexpr std::string_view kOperation = "broadcast";
  check_tensor(kOperation, "tensor", tensor);
  TN_CHECK_AS(CommError, root >= 0 && root < size_, context(kOperation), ": root ", root,
              " is out of range for a group of ", size_, " ranks");
  HostStaging staging(options_.stage_cpu_tensors);
  const bool is_root = rank_ == root;
  Tensor host = staging.stage(tensor, /*copy_in=*/is_root, /*copy_back=*/!is_root);
  return staging.wrap(submit(
      std::make_unique<BroadcastOperation>(context(kOperation), comm_, host, root),
      FlightSequence::collective, kOperation, static_cast<std::int64_t>(tensor.nbytes()), {root}));
}

WorkHandle MpiCommunicator::send_async(const Tensor& tensor, int peer, int tag) {
  return point_to_point("send", {P2POp{P2POp::Kind::Send, tensor, peer, tag}});
}

WorkHandle MpiCommunicator::recv_async(Tensor& tensor, int peer, int tag) {
  return point_to_point("recv", {P2POp{P2POp::Kind::Recv, tensor, peer, tag}});
}

WorkHandle MpiCommunicator::exchange_async(std::vector<P2POp> ops) {
  return point_to_point("exchange", std::move(ops));
}

WorkHandle MpiCommunicator::point_to_point(std::string_view operation, std::vector<P2POp> ops) {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    // exchange names the entry at fault; send and recv have only the one.
    const bool batch = operation == "exchange";
    const std::string which = batch ? detail::concat("ops[", i, "]: ") : "";
    check_tensor(operation, batch ? detail::concat("ops[", i, "].tensor") : "tensor", op.tensor);
    check_peer(operation, which, op.peer, op.tag);
  }
  HostStaging staging(options_.stage_cpu_tensors);
  std::int64_t bytes = 0;
  std::vector<int> peers;
  for (P2POp& op : ops) {
    const bool recv = op.kind == P2POp::Kind::Recv;
    op.tensor = staging.stage(op.tensor, /*copy_in=*/!recv, /*copy_back=*/recv);
    bytes += static_cast<std::int64_t>(op.tensor.nbytes());
    if (std::find(peers.begin(), peers.end(), op.peer) == peers.end()) peers.push_back(op.peer);
  }
  return staging.wrap(
      submit(std::make_unique<PointToPointOperation>(context(operation), comm_, std::move(ops)),
             FlightSequence::point_to_point, operation, bytes, peers));
}

WorkHandle MpiCommunicator::barrier_async() {
  return submit(std::make_unique<BarrierOperation>(context("barrier"), comm_),
                FlightSequence::collective, "barrier", 0);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, const std::string& name) {
  MPI_Comm sub = MPI_COMM_NULL;
  MpiProgressEngine::instance().run(
      [&] {
        TN_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub),
                     context(detail::concat("split into '", name, "'")));
      },
      record_call("split"), state_);
  if (sub == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiCommunicator>(sub, name, options_);
}

std::unique_ptr<Communicator> MpiCommunicator::split_node_local(const std::string& name) {
  MPI_Comm sub = MPI_COMM_NULL;
  MpiProgressEngine::instance().run(
      [&] {
        TN_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &sub),
                     context(detail::concat("split_node_local into '", name, "'")));
      },
      record_call("split_node_local"), state_);
  TN_CHECK(sub != MPI_COMM_NULL, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) gave no communicator");
  return std::make_unique<MpiCommunicator>(sub, name, options_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::duplicate(const std::string& name,
                                                            Options options) {
  MPI_Comm copy = MPI_COMM_NULL;
  MpiProgressEngine::instance().run(
      [&] {
        TN_MPI_CHECK(MPI_Comm_dup(comm_, &copy),
                     context(detail::concat("duplicate as '", name, "'")));
      },
      record_call("duplicate"), state_);
  return std::make_unique<MpiCommunicator>(copy, name, options);
}

}  // namespace ternion
