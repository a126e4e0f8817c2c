#include "parallel/comm/cuda/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/error.h"
#include "parallel/comm/nccl_check.h"

namespace ternion {

using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::seconds kDefaultTimeout{600};
// Host-side polling of an event or of NCCL's state: spin (yielding) for a moment, because most
// waits end quickly, then sleep between looks, so that waiting for a slow peer does not take a
// core from this rank's own host work.
constexpr auto kSpinWindow = std::chrono::milliseconds(2);
constexpr auto kPollSleep = std::chrono::microseconds(50);
// A host name fits in 64 bytes on Linux (HOST_NAME_MAX); two words per 4 bytes of it.
constexpr std::int64_t kHostNameBytes = 128;

class Poller {
 public:
  void pause() {
    if (Clock::now() - start_ < kSpinWindow) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kPollSleep);
    }
  }

 private:
  Clock::time_point start_ = Clock::now();
};

// Non-blocking: NCCL calls return ncclInProgress instead of waiting for peers, so every wait
// stays in our polling loops, where the timeout and ncclCommAbort can end it.
ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

ncclDataType_t nccl_reduce_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    case DType::U16: break;
  }
  TN_THROW(InternalError, "no NCCL reduction type for ", dtype_name(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Average: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
  }
  TN_THROW(InternalError, "no NCCL operation for ReduceOp ", static_cast<int>(op));
}

bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto a_begin = reinterpret_cast<std::uintptr_t>(a.raw_data());
  const auto b_begin = reinterpret_cast<std::uintptr_t>(b.raw_data());
  return a_begin < b_begin + b.nbytes() && b_begin < a_begin + a.nbytes();
}

char* bytes_of(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

// ncclGroupStart ... ncclGroupEnd; a group left by an exception is still ended, so that later
// NCCL calls on this thread are not swallowed into it.
class NcclGroup {
 public:
  explicit NcclGroup(const std::string& where) : where_(where) {
    TN_NCCL_CHECK(ncclGroupStart(), where_);
  }
  ~NcclGroup() {
    if (!ended_) (void)ncclGroupEnd();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void end() {
    ended_ = true;
    TN_NCCL_CHECK_STARTED(ncclGroupEnd(), where_);
  }

 private:
  const std::string& where_;
  bool ended_ = false;
};

}  // namespace

// A stream of one communicator's own, as c10d gives each NCCL process group one: operations
// of different groups never queue behind each other, so a pipeline transfer waiting for its
// peer cannot hold back a tensor-parallel collective that the peer needs first.
class OwnedStream {
 public:
  OwnedStream() {
    cuda::bind_this_thread();
    TN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~OwnedStream() {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);  // released once its work is done
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A send posted later (see NcclCommunicator's header): the operation, and the Work of the
// NCCL group it went out in, once it has.
struct DeferredSend {
  P2POp op;
  std::string where;
  WorkHandle issued;
};

// The ncclComm_t and what the communicator and its outstanding Work share: the last owner
// destroys it. Destruction never throws: a healthy communicator is finalised (its issued
// operations flushed, within the timeout) and destroyed; one that failed, timed out, or dies
// while an exception unwinds the stack (a peer may be gone) is aborted.
struct NcclCommState {
  NcclCommState(ncclComm_t comm_, std::string name_, std::chrono::seconds timeout_)
      : comm(comm_), name(std::move(name_)), timeout(timeout_) {}
  ~NcclCommState();
  NcclCommState(const NcclCommState&) = delete;
  NcclCommState& operator=(const NcclCommState&) = delete;

  std::string context(std::string_view operation) const {
    return detail::concat(operation, " on NCCL group '", name, "' (rank ", rank, " of ", size,
                          ")");
  }
  void check_usable(const std::string& where) const {
    TN_CHECK_AS(CommError, comm != nullptr, where,
                ": the NCCL communicator was aborted after an earlier failure: ", failure);
  }
  // Aborts the communicator (kernels and peers waiting on it give up) and throws `message`.
  [[noreturn]] void fail(const std::string& message) {
    if (failure.empty()) failure = message;
    abort();
    throw CommError(message);
  }
  void abort() noexcept {
    if (comm == nullptr) return;
    (void)ncclCommAbort(comm);
    comm = nullptr;
  }
  // One look at NCCL's state: true when no operation is still being set up, false while one
  // is; aborts and throws on an asynchronous error.
  bool ready(const std::string& where) {
    check_usable(where);
    ncclResult_t state = ncclSuccess;
    const ncclResult_t status = ncclCommGetAsyncError(comm, &state);
    if (status != ncclSuccess)
      fail(detail::concat(where, ": ncclCommGetAsyncError failed: ",
                          detail::nccl_error_text(status)));
    if (state == ncclInProgress) return false;
    if (state != ncclSuccess)
      fail(detail::concat(where, ": NCCL reported an asynchronous error: ",
                          detail::nccl_error_text(state)));
    return true;
  }
  void wait_ready(const std::string& where, Clock::time_point deadline) {
    Poller poller;
    while (!ready(where)) {
      if (Clock::now() >= deadline) fail(timeout_message(where));
      poller.pause();
    }
  }
  std::string timeout_message(const std::string& where) const {
    return detail::concat(where, ": not finished after ", timeout.count(),
                          " s (TERNION_NCCL_TIMEOUT_S): a peer may have failed or never called "
                          "it; the NCCL communicator was aborted");
  }

  ncclComm_t comm = nullptr;  // null once aborted or destroyed
  OwnedStream stream;         // every operation of this communicator, in call order
  std::vector<std::shared_ptr<DeferredSend>> pending_sends;  // not yet posted to NCCL
  std::string name;
  int rank = 0;
  int size = 1;
  std::chrono::seconds timeout;
  std::string failure;  // why it was aborted
};

NcclCommState::~NcclCommState() {
  if (comm == nullptr) return;
  try {
    cuda::bind_this_thread();
    if (std::uncaught_exceptions() > 0) {
      abort();
      return;
    }
    const std::string where = context("destroying the communicator");
    TN_NCCL_CHECK_STARTED(ncclCommFinalize(comm), where);
    wait_ready(where, Clock::now() + timeout);
    TN_NCCL_CHECK_STARTED(ncclCommDestroy(comm), where);
    comm = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ternion: %s\n", e.what());
    abort();
  }
}

namespace {

// The Work of one NCCL operation (see the header).
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclCommState> state, std::string where, cuda::Event done,
           std::vector<Tensor> buffers, Clock::time_point deadline)
      : state_(std::move(state)),
        where_(std::move(where)),
        done_(std::move(done)),
        buffers_(std::move(buffers)),
        deadline_(deadline) {}

  ~NcclWork() override {
    // A failed operation's communicator is aborted (its kernels told to quit): do not wait.
    if (finished_ || error_ || buffers_.empty()) return;
    // Dropped unwaited: later kernels (which may get this memory) wait for the operation.
    try {
      done_.make_wait(cuda::compute_stream());
    } catch (...) {
    }
  }

  bool is_completed() override {
    if (finished_ || error_) return true;
    try {
      if (!done_.query()) {
        state_->ready(where_);  // an asynchronous error completes the work (with the error)
        return false;
      }
      finished_ = true;
      buffers_.clear();
    } catch (...) {
      error_ = std::current_exception();
    }
    return true;
  }

  void wait() override {
    if (error_) std::rethrow_exception(error_);
    try {
      if (!finished_) {
        Poller poller;
        while (!done_.query()) {
          state_->ready(where_);
          if (Clock::now() >= deadline_) state_->fail(state_->timeout_message(where_));
          poller.pause();
        }
        finished_ = true;
      }
      done_.make_wait(cuda::compute_stream());  // free once complete; orders later kernels
      buffers_.clear();
    } catch (...) {
      error_ = std::current_exception();
      throw;
    }
  }

 private:
  std::shared_ptr<NcclCommState> state_;
  std::string where_;
  cuda::Event done_;
  std::vector<Tensor> buffers_;  // alive until the device is done with them
  Clock::time_point deadline_;
  bool finished_ = false;
  std::exception_ptr error_;
};

// Runs `calls(comm, stream)` (the NCCL calls of one operation) on the comm stream after the
// compute stream's work so far, waits until NCCL has enqueued them, and returns their Work.
template <class Calls>
WorkHandle enqueue(const std::shared_ptr<NcclCommState>& state, const std::string& where,
                   std::vector<Tensor> buffers, Calls&& calls) {
  state->check_usable(where);
  const Clock::time_point deadline = Clock::now() + state->timeout;
  cudaStream_t stream = state->stream.get();
  cuda::stream_wait(stream, cuda::compute_stream());
  try {
    calls(state->comm, stream);
  } catch (const CommError& e) {
    state->fail(e.what());
  }
  // A non-blocking communicator may still be enqueueing (connecting to a peer, say).
  state->wait_ready(where, deadline);
  cuda::Event done;
  done.record(stream);
  return std::make_shared<NcclWork>(state, where, std::move(done), std::move(buffers), deadline);
}

// Posts `ops` (already checked) together with every pending send, as one NCCL group, and
// hands the group's Work to those sends.
WorkHandle post_point_to_point(const std::shared_ptr<NcclCommState>& state,
                               const std::string& where, std::vector<P2POp> ops) {
  std::vector<std::shared_ptr<DeferredSend>> sends;
  sends.swap(state->pending_sends);
  std::vector<P2POp> all;
  for (const auto& send : sends) all.push_back(send->op);
  all.insert(all.end(), ops.begin(), ops.end());
  std::vector<Tensor> buffers;
  for (const P2POp& op : all) buffers.push_back(op.tensor);
  WorkHandle work = enqueue(state, where, std::move(buffers), [&](ncclComm_t comm, cudaStream_t stream) {
    NcclGroup group(where);
    for (const P2POp& op : all) {
      if (op.tensor.numel() == 0) continue;
      if (op.kind == P2POp::Kind::Send) {
        TN_NCCL_CHECK_STARTED(ncclSend(op.tensor.raw_data(), op.tensor.nbytes(), ncclUint8,
                                       op.peer, comm, stream),
                              where);
      } else {
        TN_NCCL_CHECK_STARTED(ncclRecv(op.tensor.raw_data(), op.tensor.nbytes(), ncclUint8,
                                       op.peer, comm, stream),
                              where);
      }
    }
    group.end();
  });
  for (const auto& send : sends) send->issued = work;
  return work;
}

// The Work of a deferred send: waiting for it (or asking whether it is done) posts it, with
// whatever else is pending, if nothing has yet; so does dropping it unwaited.
class DeferredSendWork final : public Work {
 public:
  DeferredSendWork(std::shared_ptr<NcclCommState> state, std::shared_ptr<DeferredSend> send)
      : state_(std::move(state)), send_(std::move(send)) {}
  ~DeferredSendWork() override {
    try {
      post();
    } catch (...) {
      // The communicator failed (and was aborted); the error surfaces at its next use.
    }
  }
  bool is_completed() override {
    post();
    return send_->issued->is_completed();
  }
  void wait() override {
    post();
    send_->issued->wait();
  }

 private:
  void post() {
    if (!send_->issued) post_point_to_point(state_, send_->where, {});
    // Still unposted: an earlier group took this send from the pending list and then failed
    // (a CUDA error leaves the communicator usable, so the post above raised nothing).
    TN_CHECK_AS(CommError, send_->issued != nullptr, send_->where,
                ": the NCCL group that carried this send failed before posting it");
  }
  std::shared_ptr<NcclCommState> state_;
  std::shared_ptr<DeferredSend> send_;
};

}  // namespace

std::chrono::seconds nccl_timeout_from_environment() {
  const char* text = std::getenv("TERNION_NCCL_TIMEOUT_S");
  if (text == nullptr || text[0] == '\0') return kDefaultTimeout;
  char* end = nullptr;
  const long long seconds = std::strtoll(text, &end, 10);
  TN_CHECK_AS(ConfigError, end != nullptr && *end == '\0' && seconds > 0,
              "TERNION_NCCL_TIMEOUT_S must be a whole number of seconds above 0, got '", text,
              "'");
  return std::chrono::seconds(seconds);
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator& bootstrap,
                                                           std::string name) {
  const std::string where = detail::concat(
      "creating the NCCL communicator '", name, "' (rank ", bootstrap.rank(), " of ",
      bootstrap.size(),
      "; NCCL needs one GPU per rank: with several ranks per GPU use parallel.backend: mpi)");
  const std::chrono::seconds timeout = nccl_timeout_from_environment();
  cuda::bind_this_thread();  // NCCL takes the calling thread's device

  // The unique id travels as 2-byte words: any backend broadcasts those bit for bit.
  static_assert(sizeof(ncclUniqueId) % 2 == 0);
  Tensor id_words =
      Tensor::zeros({static_cast<std::int64_t>(sizeof(ncclUniqueId) / 2)}, DType::U16);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (bootstrap.rank() == 0) {
    TN_NCCL_CHECK(ncclGetUniqueId(&id), where);
    std::memcpy(id_words.raw_data(), &id, sizeof id);
  }
  bootstrap.broadcast(id_words, 0);
  std::memcpy(&id, id_words.raw_data(), sizeof id);

  ncclConfig_t config = nonblocking_config();
  ncclComm_t comm = nullptr;
  const ncclResult_t started =
      ncclCommInitRankConfig(&comm, bootstrap.size(), id, bootstrap.rank(), &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    TN_THROW(CommError, where, ": ncclCommInitRankConfig failed: ",
             detail::nccl_error_text(started));
  }
  auto state = std::make_shared<NcclCommState>(comm, std::move(name), timeout);
  state->rank = bootstrap.rank();
  state->size = bootstrap.size();
  state->wait_ready(where, Clock::now() + timeout);
  return std::make_unique<NcclCommunicator>(std::move(state));
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclCommState> state)
    : state_(std::move(state)) {
  TN_CHECK(state_ != nullptr && state_->comm != nullptr, "an NcclCommunicator needs a communicator");
}

NcclCommunicator::~NcclCommunicator() = default;  // the last owner of state_ destroys it

int NcclCommunicator::rank() const { return state_->rank; }
int NcclCommunicator::size() const { return state_->size; }
const std::string& NcclCommunicator::name() const { return state_->name; }

std::string NcclCommunicator::context(std::string_view operation) const {
  return state_->context(operation);
}

void NcclCommunicator::check_tensor(std::string_view operation, std::string_view role,
                                    const Tensor& t) const {
  TN_CHECK_AS(CommError, t.defined(), context(operation), ": ", role, " is an undefined tensor");
  TN_CHECK_AS(CommError, !t.device().is_cpu(), context(operation),
              ": the NCCL backend takes CUDA tensors; ", role, " is ", t.str(),
              ": CPU tensors go through MPI (a DeviceRoutingCommunicator sends them there)");
  const int device = cuda::current_device();
  TN_CHECK_AS(CommError, t.device().index == device, context(operation), ": ", role, " is ",
              t.str(), " but this rank's NCCL communicator is on cuda:", device);
  TN_CHECK_AS(CommError, t.is_contiguous(), context(operation), ": ", role,
              " must be contiguous; it is a strided view ", t.str(), " (use .contiguous())");
}

namespace {
void check_reducible(const std::string& where, const Tensor& t) {
  TN_CHECK_AS(CommError, t.dtype() != DType::U16, where, ": the NCCL backend cannot reduce ",
              dtype_name(t.dtype()), "; reduce an i32 or f32 copy");
}
}  // namespace

WorkHandle NcclCommunicator::all_reduce_async(Tensor& tensor, ReduceOp op) {
  constexpr std::string_view kOperation = "all_reduce";
  check_tensor(kOperation, "tensor", tensor);
  const std::string where = context(kOperation);
  check_reducible(where, tensor);
  return enqueue(state_, where, {tensor}, [&](ncclComm_t comm, cudaStream_t stream) {
    if (tensor.numel() == 0) return;
    TN_NCCL_CHECK_STARTED(ncclAllReduce(tensor.raw_data(), tensor.raw_data(),
                                        static_cast<std::size_t>(tensor.numel()),
                                        nccl_reduce_type(tensor.dtype()), nccl_op(op), comm,
                                        stream),
                          where);
  });
}

WorkHandle NcclCommunicator::all_gather_async(Tensor& out, const Tensor& in) {
  constexpr std::string_view kOperation = "all_gather";
  check_tensor(kOperation, "out", out);
  check_tensor(kOperation, "in", in);
  const std::string where = context(kOperation);
  const int size = state_->size, rank = state_->rank;
  TN_CHECK_AS(CommError, out.dtype() == in.dtype(), where, ": out is ", dtype_name(out.dtype()),
              " but in is ", dtype_name(in.dtype()));
  TN_CHECK_AS(CommError, out.numel() == size * in.numel(), where, ": out has ", out.numel(),
              " elements; it must hold group size x in = ", size, " x ", in.numel(), " = ",
              size * in.numel());
  // In place when `in` is already where this rank's chunk of `out` goes (NCCL's own rule).
  const bool in_place = in.numel() > 0 && bytes_of(in) == bytes_of(out) + rank * in.nbytes();
  TN_CHECK_AS(CommError, in_place || !overlaps(out, in), where,
              ": in overlaps out without being exactly out's chunk ", rank);
  return enqueue(state_, where, {out, in}, [&](ncclComm_t comm, cudaStream_t stream) {
    if (in.numel() == 0) return;
    TN_NCCL_CHECK_STARTED(
        ncclAllGather(in.raw_data(), out.raw_data(), in.nbytes(), ncclUint8, comm, stream), where);
  });
}

WorkHandle NcclCommunicator::reduce_scatter_async(Tensor& out, const Tensor& in, ReduceOp op) {
  constexpr std::string_view kOperation = "reduce_scatter";
  check_tensor(kOperation, "out", out);
  check_tensor(kOperation, "in", in);
  const std::string where = context(kOperation);
  check_reducible(where, in);
  const int size = state_->size, rank = state_->rank;
  TN_CHECK_AS(CommError, out.dtype() == in.dtype(), where, ": out is ", dtype_name(out.dtype()),
              " but in is ", dtype_name(in.dtype()));
  const ChunkRange mine = chunk_range(in.numel(), size, rank);
  TN_CHECK_AS(CommError, out.numel() == mine.size(), where, ": out has ", out.numel(),
              " elements, but chunk ", rank, " of in's ", in.numel(), " elements over ", size,
              " ranks has ", mine.size());
  TN_CHECK_AS(CommError, !overlaps(out, in), where,
              ": out overlaps in (reduce_scatter does not run in place)");
  return enqueue(state_, where, {out, in}, [&](ncclComm_t comm, cudaStream_t stream) {
    if (in.numel() == 0) return;
    const ncclDataType_t type = nccl_reduce_type(in.dtype());
    if (in.numel() % size == 0) {
      TN_NCCL_CHECK_STARTED(
          ncclReduceScatter(in.raw_data(), out.raw_data(), static_cast<std::size_t>(mine.size()),
                            type, nccl_op(op), comm, stream),
          where);
      return;
    }
    // Uneven chunks: each rank's chunk reduced to it, all in one group. A non-root's receive
    // buffer is unused; it gets its send buffer.
    const std::size_t element = dtype_size(in.dtype());
    NcclGroup group(where);
    for (int root = 0; root < size; ++root) {
      const ChunkRange chunk = chunk_range(in.numel(), size, root);
      if (chunk.size() == 0) continue;
      const char* send = bytes_of(in) + static_cast<std::size_t>(chunk.begin) * element;
      void* receive = root == rank ? out.raw_data() : const_cast<char*>(send);
      TN_NCCL_CHECK_STARTED(ncclReduce(send, receive, static_cast<std::size_t>(chunk.size()),
                                       type, nccl_op(op), root, comm, stream),
                            where);
    }
    group.end();
  });
}

WorkHandle NcclCommunicator::broadcast_async(Tensor& tensor, int root) {
  constexpr std::string_view kOperation = "broadcast";
  check_tensor(kOperation, "tensor", tensor);
  const std::string where = context(kOperation);
  TN_CHECK_AS(CommError, root >= 0 && root < state_->size, where, ": root ", root,
              " is out of range for a group of ", state_->size, " ranks");
  return enqueue(state_, where, {tensor}, [&](ncclComm_t comm, cudaStream_t stream) {
    if (tensor.numel() == 0) return;
    TN_NCCL_CHECK_STARTED(ncclBroadcast(tensor.raw_data(), tensor.raw_data(), tensor.nbytes(),
                                        ncclUint8, root, comm, stream),
                          where);
  });
}

WorkHandle NcclCommunicator::send_async(const Tensor& tensor, int peer, int tag) {
  const P2POp op{P2POp::Kind::Send, tensor, peer, tag};
  check_point_to_point("send", {op});
  auto send = std::make_shared<DeferredSend>(DeferredSend{op, context("send"), nullptr});
  state_->pending_sends.push_back(send);
  return std::make_shared<DeferredSendWork>(state_, std::move(send));
}

WorkHandle NcclCommunicator::recv_async(Tensor& tensor, int peer, int tag) {
  return point_to_point("recv", {P2POp{P2POp::Kind::Recv, tensor, peer, tag}});
}

WorkHandle NcclCommunicator::exchange_async(std::vector<P2POp> ops) {
  return point_to_point("exchange", std::move(ops));
}

WorkHandle NcclCommunicator::point_to_point(std::string_view operation, std::vector<P2POp> ops) {
  check_point_to_point(operation, ops);
  return post_point_to_point(state_, context(operation), std::move(ops));
}

void NcclCommunicator::check_point_to_point(std::string_view operation,
                                            const std::vector<P2POp>& ops) const {
  const std::string where = context(operation);
  const bool batch = operation == "exchange";
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    const std::string which = batch ? detail::concat("ops[", i, "]: ") : "";
    check_tensor(operation, batch ? detail::concat("ops[", i, "].tensor") : "tensor", op.tensor);
    TN_CHECK_AS(CommError, op.peer >= 0 && op.peer < state_->size, where, ": ", which, "peer ",
                op.peer, " is out of range for a group of ", state_->size, " ranks");
    TN_CHECK_AS(CommError, op.tag >= 0, where, ": ", which, "tag ", op.tag, " is negative");
  }
}

WorkHandle NcclCommunicator::barrier_async() {
  // NCCL has no barrier: an all-reduce of one float, whose wait() returns once every rank has
  // joined it.
  Tensor token = Tensor::zeros({1}, DType::F32, Device::cuda(cuda::current_device()));
  const std::string where = context("barrier");
  return enqueue(state_, where, {token}, [&](ncclComm_t comm, cudaStream_t stream) {
    TN_NCCL_CHECK_STARTED(
        ncclAllReduce(token.raw_data(), token.raw_data(), 1, ncclFloat32, ncclSum, comm, stream),
        where);
  });
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key,
                                                      const std::string& name) {
  const std::string where = context(detail::concat("split into '", name, "'"));
  state_->check_usable(where);
  cuda::bind_this_thread();
  const Clock::time_point deadline = Clock::now() + state_->timeout;
  ncclConfig_t config = nonblocking_config();
  ncclComm_t child = nullptr;  // NCCL may write it from its own thread, until the split is done
  const ncclResult_t started =
      ncclCommSplit(state_->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config);
  if (started != ncclSuccess && started != ncclInProgress)
    state_->fail(detail::concat(where, ": ncclCommSplit failed: ",
                                detail::nccl_error_text(started)));
  // The parent is busy until the split's background work is done.
  state_->wait_ready(where, deadline);
  if (color < 0) return nullptr;
  // NCCL versions differ in when they publish the child (at once, or when it is ready).
  Poller poller;
  std::atomic_ref<ncclComm_t> published(child);
  while (published.load(std::memory_order_acquire) == nullptr) {
    if (Clock::now() >= deadline) state_->fail(state_->timeout_message(where));
    poller.pause();
  }
  auto state = std::make_shared<NcclCommState>(published.load(), name, state_->timeout);
  state->wait_ready(where, deadline);
  TN_NCCL_CHECK(ncclCommUserRank(state->comm, &state->rank), where);
  TN_NCCL_CHECK(ncclCommCount(state->comm, &state->size), where);
  return std::make_unique<NcclCommunicator>(std::move(state));
}

std::unique_ptr<Communicator> NcclCommunicator::split_node_local(const std::string& name) {
  // A node is the ranks with this rank's host name; its color the first such rank.
  Tensor mine_host = Tensor::zeros({kHostNameBytes / 2}, DType::U16);
  char host_name[kHostNameBytes] = {};
  TN_CHECK_AS(CommError, gethostname(host_name, kHostNameBytes - 1) == 0,
              context("split_node_local"), ": gethostname failed: ", std::strerror(errno));
  std::memcpy(mine_host.raw_data(), host_name, kHostNameBytes);
  const Device device = Device::cuda(cuda::current_device());
  Tensor mine = Tensor::empty(mine_host.shape(), DType::U16, device);
  mine.copy_from(mine_host);
  Tensor everyone = Tensor::empty({state_->size * kHostNameBytes / 2}, DType::U16, device);
  all_gather(everyone, mine);
  Tensor everyone_host = Tensor::empty(everyone.shape(), DType::U16);
  everyone_host.copy_from(everyone);
  int color = state_->rank;
  for (int r = 0; r < state_->size; ++r) {
    if (std::memcmp(bytes_of(everyone_host) + r * kHostNameBytes, host_name, kHostNameBytes) == 0) {
      color = r;
      break;
    }
  }
  return split(color, state_->rank, name);
}

}  // namespace ternion
