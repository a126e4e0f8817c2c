#include "parallel/comm/cuda/nccl_communicator.h"

#include "parallel/comm/comm_watchdog.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/error.h"
#include "parallel/comm/nccl_check.h"

namespace ternion {

using Clock = std::chrono::steady_clock;

namespace {

// Host-side polling by the calling thread (NCCL's state while it sets an operation up, a
// barrier's event): spin (yielding) for a moment, because most waits end quickly, then sleep
// between looks, so that waiting for a slow peer does not take a core from this rank's host work.
constexpr auto kSpinWindow = std::chrono::milliseconds(2);
constexpr auto kPollSleep = std::chrono::microseconds(50);
// The watchdog looks at its communicator this often while operations are outstanding (an error
// or a hang is acted on within it, and an unwaited operation's tensors go back to the allocator
// within it of the operation's end), and this often when idle (NCCL's asynchronous errors, a
// peer's connection closing say, may arrive then too).
constexpr auto kWatchdogBusyPoll = std::chrono::milliseconds(10);
constexpr auto kWatchdogIdlePoll = std::chrono::seconds(1);
// How long a destructor waits for its watchdog thread to exit before leaving it behind,
// detached. The watchdog is only ever that slow inside ncclCommAbort, which NCCL's issues report
// can block (NVIDIA/nccl#564: behind another communicator's spinning kernels; #992, #863).
constexpr auto kWatchdogExitGrace = std::chrono::seconds(10);
// A host name fits in 64 bytes on Linux (HOST_NAME_MAX); two words per 4 bytes of it.
constexpr std::int64_t kHostNameBytes = 128;
constexpr const char* kAborted = "; the NCCL communicator was aborted";

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

// The tensors of an operation that may still be running on the device when its communicator
// failed: never returned to the allocator, which would hand the memory to new kernels while the
// device may still write it. The process is failing; the memory is not missed.
void leak(std::vector<Tensor> buffers) {
  if (!buffers.empty()) (void)new std::vector<Tensor>(std::move(buffers));  // never freed
}

// Polls a communicator that only the calling thread knows (being created, split off or
// finalised) until NCCL has finished with it in the background. On an error or at `deadline`
// it aborts it and throws CommError.
void ready_or_abort(ncclComm_t comm, const std::string& where, Clock::time_point deadline,
                    std::chrono::seconds timeout) {
  Poller poller;
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t status = ncclCommGetAsyncError(comm, &state);
    std::string failure;
    if (status != ncclSuccess) {
      failure = detail::concat(where, ": ncclCommGetAsyncError failed: ",
                               detail::nccl_error_text(status));
    } else if (state == ncclSuccess) {
      return;
    } else if (state != ncclInProgress) {
      failure = detail::concat(where, ": NCCL reported an asynchronous error: ",
                               detail::nccl_error_text(state));
    } else if (Clock::now() >= deadline) {
      failure = detail::concat(where, ": not finished after ", timeout.count(),
                               " s (parallel.comm_timeout_s, or TERNION_NCCL_TIMEOUT_S): a "
                               "peer may have failed or never called it");
    }
    if (!failure.empty()) {
      (void)ncclCommAbort(comm);
      throw CommError(failure + kAborted);
    }
    poller.pause();
  }
}

// The first NCCL failure of the process, for check_nccl_health (the trainer's host syncs do not
// know which communicator failed). Allocated once and never freed, so that a watchdog left
// detached at exit may still record into it during static destruction.
struct FirstFailure {
  std::mutex mutex;
  std::string message;  // guarded by mutex; written once
  std::atomic<bool> recorded{false};
};

FirstFailure& first_failure() {
  static FirstFailure* const record = new FirstFailure;
  return *record;
}

void record_first_failure(const std::string& message) {
  FirstFailure& record = first_failure();
  std::lock_guard lock(record.mutex);
  if (record.recorded.load(std::memory_order_relaxed)) return;
  record.message = message;
  record.recorded.store(true, std::memory_order_release);
}

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

// One enqueued operation: what its Work and the communicator's watchdog share.
struct PendingOp {
  PendingOp(std::string where_, cuda::Event done_, std::vector<Tensor> buffers_,
            Clock::time_point deadline_)
      : where(std::move(where_)),
        done(std::move(done_)),
        deadline(deadline_),
        buffers(std::move(buffers_)) {}

  const std::string where;           // "all_reduce on NCCL group 'tp[0,1]' (rank 1 of 2)"
  const cuda::Event done;            // on the communicator's stream, after the NCCL calls
  const Clock::time_point deadline;  // its enqueue + TERNION_NCCL_TIMEOUT_S
  // Guarded by NcclCore::mutex. Cleared when the header's rule (a) or (b) first holds.
  std::vector<Tensor> buffers;
};

// The NCCL handle and what the calling thread and the watchdog thread share. Both hold it by
// shared_ptr, so a watchdog left detached (kWatchdogExitGrace) never touches freed memory.
//
// Locking. Every NCCL call on `comm`, from either thread, is made under `mutex`, so NCCL never
// sees two of our threads on the communicator at once, which is the condition of NCCL's thread
// safety rules ("It is safe to operate a communicator from multiple threads as long as users
// can guarantee only one thread operates the communicator at a time": NCCL User Guide, Thread
// Safety, docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/threadsafety.html). The
// calling thread never blocks under it: the communicator is non-blocking, so each call returns
// at once (ncclInProgress while NCCL finishes in the background), and the polls for that
// release the mutex between looks. The watchdog's ncclCommGetAsyncError is how NCCL's
// non-blocking mode asks to be polled meanwhile ("If any NCCL function returns ncclInProgress,
// users must query the communicator state until it becomes ncclSuccess": NCCL docs, nccl4py
// Communicator.get_async_error). It is not a plain read: in non-blocking mode each group's
// launch runs on a thread NCCL starts, and ncclCommGetAsyncError joins and frees that thread
// once it has finished, so it too must be called under the mutex, as it is.
//
// ncclCommAbort runs without the mutex, on a handle first taken out of `comm` under it: no call
// of ours is on the communicator then, and none can start (they find the failure recorded and
// throw it). The abort itself may take long: it "frees resources associated with communicator
// object and aborts any operations that might still be running on the device" (nccl.h); in
// NCCL's src/init.cc it first sets the abort flag the kernels poll ("Ask anything that might
// still be running on the device to quit"), then frees, which may wait for the device
// (NVIDIA/nccl#564; multi-threaded abort could hang before NCCL 2.19, #992; we build against
// 2.28). Because the failure is recorded before the abort, the calling thread throws it at its
// next call even if the abort never returns, and a thread blocked in a device synchronisation
// is released once the flag is set. Aborting from a thread other than the one that issues the
// operations is the intended use (NVIDIA/nccl#140: poll the stream and ncclCommGetAsyncError,
// abort on an error or a timeout; c10d's watchdog does that). NCCL's rule against issuing
// operations on communicators of one device from several threads concerns kernel launches;
// the watchdog launches none.
struct NcclCore {
  NcclCore(ncclComm_t comm_, std::string name_, int rank_, int size_,
           std::chrono::seconds timeout_)
      : name(std::move(name_)), rank(rank_), size(size_), timeout(timeout_), comm(comm_) {}
  // Normally the state has destroyed or aborted the handle; this covers a state whose
  // construction failed.
  ~NcclCore() {
    if (comm != nullptr) (void)ncclCommAbort(comm);
  }
  NcclCore(const NcclCore&) = delete;
  NcclCore& operator=(const NcclCore&) = delete;

  std::string context(std::string_view operation) const {
    return detail::concat(operation, " on NCCL group '", name, "' (rank ", rank, " of ", size,
                          ")");
  }
  std::string timeout_message(const std::string& where) const {
    return detail::concat(where, ": not finished after ", timeout.count(),
                          " s (parallel.comm_timeout_s, or TERNION_NCCL_TIMEOUT_S): a peer "
                          "may have failed or never called it",
                          kAborted);
  }

  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  void throw_if_failed() const {
    if (failed()) throw CommError(failure_);
  }
  // Records `message` as the failure unless one is recorded already (the first one stays),
  // takes the handle and aborts it. `announce`: print it to stderr once (the watchdog's
  // failures: no caller may be there to report them). Never throws.
  void fail(const std::string& message, bool announce) noexcept;
  [[noreturn]] void fail_and_throw(const std::string& message) {
    fail(message, false);
    throw CommError(failed() ? failure_ : message);
  }

  // Runs `call(comm)` (NCCL calls) under the mutex, or throws the recorded failure.
  template <class Call>
  decltype(auto) with_comm(const std::string& where, Call&& call) {
    std::lock_guard lock(mutex);
    throw_if_failed();
    TN_CHECK_AS(CommError, comm != nullptr, where, ": the NCCL communicator is destroyed");
    return call(comm);
  }
  // One look at NCCL's state for a wait of the calling thread: true once nothing is being set
  // up in the background; an asynchronous error is recorded as the failure and thrown.
  bool ready(const std::string& where);
  // Polls `ready` until true; at `deadline` records a timeout as the failure and throws it.
  void wait_ready(const std::string& where, Clock::time_point deadline);

  // Hands an enqueued operation to the watchdog.
  void track(std::shared_ptr<PendingOp> op);
  // Releases an operation's tensors (rule (a) or (b) of the header holds).
  void release(PendingOp& op);
  // The watchdog's look, with `mutex` held: moves the tensors of the operations that have
  // completed into `released` and forgets them; returns the failure to record, if any.
  std::string inspect(std::vector<Tensor>& released);
  // Waits until no operation is outstanding or a failure is recorded; false at `deadline`.
  bool wait_drained(Clock::time_point deadline);

  const std::string name;
  const int rank;
  const int size;
  const std::chrono::seconds timeout;

  std::mutex mutex;
  std::condition_variable wake;     // to the watchdog: work arrived, or stop
  std::condition_variable settled;  // from it: drained, failed, or exited
  ncclComm_t comm;                  // guarded by mutex; null once taken to be aborted, or destroyed
  std::deque<std::shared_ptr<PendingOp>> outstanding;  // guarded by mutex; oldest first
  bool stop = false;                // guarded by mutex: the watchdog is to exit
  bool watchdog_exited = false;     // guarded by mutex: the watchdog's last act

 private:
  std::atomic<bool> failed_{false};
  std::string failure_;  // written once, under mutex, before failed_ is set; read after failed()
};

void NcclCore::fail(const std::string& message, bool announce) noexcept {
  try {
    ncclComm_t doomed = nullptr;
    bool first = false;
    {
      std::lock_guard lock(mutex);
      if (!failed_.load(std::memory_order_relaxed)) {
        failure_ = message;
        failed_.store(true, std::memory_order_release);
        first = true;
      }
      doomed = std::exchange(comm, nullptr);
    }
    wake.notify_all();
    settled.notify_all();
    if (first) {
      record_first_failure(message);
      if (announce) std::fprintf(stderr, "ternion: NCCL watchdog: %s\n", message.c_str());
    }
    if (doomed != nullptr) (void)ncclCommAbort(doomed);
  } catch (...) {
    // Only allocation can fail here; the failure flag, set first, is what matters.
  }
}

bool NcclCore::ready(const std::string& where) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t status =
      with_comm(where, [&](ncclComm_t c) { return ncclCommGetAsyncError(c, &state); });
  if (status != ncclSuccess)
    fail_and_throw(detail::concat(where, ": ncclCommGetAsyncError failed: ",
                                  detail::nccl_error_text(status), kAborted));
  if (state == ncclInProgress) return false;
  if (state != ncclSuccess)
    fail_and_throw(detail::concat(where, ": NCCL reported an asynchronous error: ",
                                  detail::nccl_error_text(state), kAborted));
  return true;
}

void NcclCore::wait_ready(const std::string& where, Clock::time_point deadline) {
  Poller poller;
  while (!ready(where)) {
    if (Clock::now() >= deadline) fail_and_throw(timeout_message(where));
    poller.pause();
  }
}

void NcclCore::track(std::shared_ptr<PendingOp> op) {
  bool was_idle = false;
  {
    std::lock_guard lock(mutex);
    was_idle = outstanding.empty();
    outstanding.push_back(std::move(op));
  }
  if (was_idle) wake.notify_one();  // from the idle poll to the busy one
}

void NcclCore::release(PendingOp& op) {
  std::vector<Tensor> released;
  {
    std::lock_guard lock(mutex);
    released.swap(op.buffers);
  }
}  // the last references drop here, outside the mutex

std::string NcclCore::inspect(std::vector<Tensor>& released) {
  // One stream: the operations complete in the order they were enqueued.
  while (!outstanding.empty()) {
    PendingOp& op = *outstanding.front();
    bool complete = false;
    try {
      complete = op.done.query();
    } catch (const std::exception& e) {
      if (failed()) break;  // already failing: keep what is left (it is leaked at the end)
      return detail::concat(op.where, ": its completion event reported an error (", e.what(), ")",
                            kAborted);
    }
    if (!complete) break;
    for (Tensor& t : op.buffers) released.push_back(std::move(t));
    op.buffers.clear();
    outstanding.pop_front();
  }
  if (outstanding.empty()) settled.notify_all();
  if (failed() || comm == nullptr) return {};
  const std::string subject =
      outstanding.empty() ? context("the communicator") : outstanding.front()->where;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t status = ncclCommGetAsyncError(comm, &state);
  if (status != ncclSuccess)
    return detail::concat(subject, ": ncclCommGetAsyncError failed: ",
                          detail::nccl_error_text(status), kAborted);
  // ncclInProgress: the calling thread is enqueueing an operation and polls that itself.
  if (state != ncclSuccess && state != ncclInProgress)
    return detail::concat(subject, ": NCCL reported an asynchronous error: ",
                          detail::nccl_error_text(state), kAborted);
  // The oldest operation has the earliest deadline.
  if (!outstanding.empty() && Clock::now() >= outstanding.front()->deadline)
    return timeout_message(outstanding.front()->where);
  return {};
}

bool NcclCore::wait_drained(Clock::time_point deadline) {
  std::unique_lock lock(mutex);
  return settled.wait_until(lock, deadline, [&] { return outstanding.empty() || failed(); });
}

namespace {

// The watchdog thread (see the header and NcclCore). Never throws: what it sees is recorded.
void watch(std::shared_ptr<NcclCore> core) noexcept {
  try {
    // cudaSetDevice is per host thread: the events and the communicator are on this process's
    // device, which this thread must select before it queries them.
    cuda::bind_this_thread();
  } catch (const std::exception& e) {
    core->fail(detail::concat(core->context("the watchdog"), ": cannot select the device: ",
                              e.what(), kAborted),
               true);
  }
  std::unique_lock lock(core->mutex);
  while (!core->stop) {
    core->wake.wait_for(lock,
                        core->outstanding.empty() ? kWatchdogIdlePoll : kWatchdogBusyPoll);
    if (core->stop) break;
    std::vector<Tensor> released;
    std::string failure;
    try {
      failure = core->inspect(released);
    } catch (const std::exception& e) {
      failure = detail::concat(core->context("the watchdog"), ": ", e.what(), kAborted);
    }
    lock.unlock();
    // The failure first: freeing can wait (on the allocator's lock), the abort must not.
    if (!failure.empty() && !core->failed()) core->fail(failure, true);
    released.clear();  // a block's last reference returns it to the allocator: not under our mutex
    lock.lock();
  }
  core->watchdog_exited = true;
  core->settled.notify_all();
}

}  // namespace

// What the communicator and its outstanding Work share; the last owner destroys it.
// Destruction never throws: a healthy communicator lets its outstanding operations finish (the
// watchdog still enforcing their deadlines), stops the watchdog, then is finalised (issued
// operations flushed, within the timeout) and destroyed; one that failed, or dies while an
// exception unwinds the stack (a peer may be gone), is aborted.
struct NcclCommState {
  // Owns `comm` from here on.
  NcclCommState(ncclComm_t comm, std::string name, int rank, int size,
                std::chrono::seconds timeout)
      : core(std::make_shared<NcclCore>(comm, std::move(name), rank, size, timeout)) {
    watchdog = std::thread(watch, core);
  }
  ~NcclCommState();
  NcclCommState(const NcclCommState&) = delete;
  NcclCommState& operator=(const NcclCommState&) = delete;

  std::shared_ptr<NcclCore> core;
  OwnedStream stream;  // every operation of this communicator, in call order
  std::vector<std::shared_ptr<DeferredSend>> pending_sends;  // not yet posted to NCCL

 private:
  void stop_watchdog() noexcept;
  std::thread watchdog;
};

void NcclCommState::stop_watchdog() noexcept {
  if (!watchdog.joinable()) return;
  try {
    bool exited = false;
    {
      std::unique_lock lock(core->mutex);
      core->stop = true;
      core->wake.notify_all();
      exited = core->settled.wait_for(lock, kWatchdogExitGrace,
                                      [&] { return core->watchdog_exited; });
    }
    if (exited) {
      watchdog.join();
      return;
    }
    std::fprintf(stderr,
                 "ternion: %s: the NCCL watchdog did not stop within %lld s (still inside "
                 "ncclCommAbort?); leaving it behind\n",
                 core->context("destroying the communicator").c_str(),
                 static_cast<long long>(kWatchdogExitGrace.count()));
  } catch (...) {
  }
  if (watchdog.joinable()) watchdog.detach();  // it holds `core` itself, so it stays valid
}

NcclCommState::~NcclCommState() {
  NcclCore& c = *core;
  const bool unwinding = std::uncaught_exceptions() > 0;
  std::string where;  // built under try: a destructor must not throw, even std::bad_alloc
  try {
    where = c.context("destroying the communicator");
    cuda::bind_this_thread();
    if (!unwinding && !c.failed() &&
        !c.wait_drained(Clock::now() + c.timeout + kWatchdogExitGrace))
      c.fail(detail::concat(where, ": operations still outstanding after ",
                            (c.timeout + kWatchdogExitGrace).count(), " s", kAborted),
             true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ternion: %s: %s\n", where.c_str(), e.what());
  }
  stop_watchdog();
  // The watchdog is gone, or stuck in an abort with the handle already taken: what is left of
  // the handle is this thread's alone.
  ncclComm_t live = nullptr;
  {
    std::lock_guard lock(c.mutex);
    live = std::exchange(c.comm, nullptr);
  }
  if (live != nullptr && unwinding) {
    (void)ncclCommAbort(live);
    live = nullptr;
  }
  if (live != nullptr) {
    try {
      TN_NCCL_CHECK_STARTED(ncclCommFinalize(live), where);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ternion: %s\n", e.what());
      (void)ncclCommAbort(live);
      live = nullptr;
    }
  }
  if (live != nullptr) {
    try {
      ready_or_abort(live, where, Clock::now() + c.timeout, c.timeout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ternion: %s\n", e.what());  // ready_or_abort has aborted it
      live = nullptr;
    }
  }
  if (live != nullptr) {
    const ncclResult_t status = ncclCommDestroy(live);
    if (status != ncclSuccess && status != ncclInProgress)
      std::fprintf(stderr, "ternion: %s: ncclCommDestroy failed: %s\n", where.c_str(),
                   detail::nccl_error_text(status).c_str());
  }
  // Operations still outstanding here (after an abort, or on a wedged device) may still be
  // running on the device: their tensors never go back to the allocator.
  std::lock_guard lock(c.mutex);
  try {
    for (const auto& op : c.outstanding) leak(std::move(op->buffers));
  } catch (...) {  // out of memory for the leak's holder: those tensors may then be freed early
  }
  c.outstanding.clear();
}

namespace {

// The Work of one NCCL operation (see the header). Dropping it unwaited needs nothing: the
// outstanding list keeps the operation's tensors until its event has completed.
class NcclWork final : public Work {
 public:
  enum class HostWait { No, UntilDone };

  NcclWork(std::shared_ptr<NcclCommState> state, std::shared_ptr<PendingOp> op,
           HostWait host_wait)
      : state_(std::move(state)), op_(std::move(op)), host_wait_(host_wait) {}

  bool is_completed() override {
    NcclCore& core = *state_->core;
    core.throw_if_failed();
    if (!op_->done.query()) return false;
    core.release(*op_);  // rule (b)
    return true;
  }

  void wait() override {
    NcclCore& core = *state_->core;
    core.throw_if_failed();
    op_->done.make_wait(cuda::compute_stream());  // orders later kernels; no host block
    core.release(*op_);                            // rule (a)
    if (host_wait_ == HostWait::No) return;
    // The watchdog enforces the timeout (and aborts, which completes the event or records the
    // failure first); this loop only waits for either.
    Poller poller;
    while (!op_->done.query()) {
      core.throw_if_failed();
      // The watchdog's own deadline, checked here too in case the watchdog itself is stuck.
      if (Clock::now() >= op_->deadline) core.fail_and_throw(core.timeout_message(op_->where));
      poller.pause();
    }
    core.throw_if_failed();
  }

 private:
  std::shared_ptr<NcclCommState> state_;
  std::shared_ptr<PendingOp> op_;
  HostWait host_wait_;
};

// Runs `calls(comm, stream)` (the NCCL calls of one operation) on the communicator's stream
// after the compute stream's work so far, waits until NCCL has enqueued them, and returns their
// Work, its operation handed to the watchdog.
template <class Calls>
WorkHandle enqueue(const std::shared_ptr<NcclCommState>& state, const std::string& where,
                   std::vector<Tensor> buffers, Calls&& calls,
                   NcclWork::HostWait host_wait = NcclWork::HostWait::No) {
  NcclCore& core = *state->core;
  core.throw_if_failed();
  const Clock::time_point deadline = Clock::now() + core.timeout;
  cudaStream_t stream = state->stream.get();
  cuda::stream_wait(stream, cuda::compute_stream());
  cuda::Event done;
  try {
    try {
      core.with_comm(where, [&](ncclComm_t comm) { calls(comm, stream); });
    } catch (const CommError& e) {
      // An NCCL call failed: abort (or, if it was the recorded failure, throw that one again).
      core.fail_and_throw(std::string(e.what()) + kAborted);
    }
    // A non-blocking communicator may still be enqueueing (connecting to a peer, say); the
    // event must follow the NCCL kernels, and NCCL allows no other work on the stream before
    // its state is ncclSuccess, so it is recorded after.
    core.wait_ready(where, deadline);
    done.record(stream);
  } catch (...) {
    leak(std::move(buffers));  // NCCL may have enqueued part of the operation on them
    throw;
  }
  auto op = std::make_shared<PendingOp>(where, std::move(done), std::move(buffers), deadline);
  core.track(op);
  return std::make_shared<NcclWork>(state, std::move(op), host_wait);
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
  WorkHandle work =
      enqueue(state, where, std::move(buffers), [&](ncclComm_t comm, cudaStream_t stream) {
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
  if (text == nullptr || text[0] == '\0') return comm_watchdog_settings().timeout;
  char* end = nullptr;
  const long long seconds = std::strtoll(text, &end, 10);
  TN_CHECK_AS(ConfigError, end != nullptr && *end == '\0' && seconds > 0,
              "TERNION_NCCL_TIMEOUT_S must be a whole number of seconds above 0, got '", text,
              "'");
  return std::chrono::seconds(seconds);
}

void check_nccl_health() {
  FirstFailure& record = first_failure();
  if (!record.recorded.load(std::memory_order_acquire)) return;
  std::lock_guard lock(record.mutex);
  throw CommError(record.message);
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
  ready_or_abort(comm, where, Clock::now() + timeout, timeout);
  return std::make_unique<NcclCommunicator>(std::make_shared<NcclCommState>(
      comm, std::move(name), bootstrap.rank(), bootstrap.size(), timeout));
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclCommState> state)
    : state_(std::move(state)) {
  TN_CHECK(state_ != nullptr && state_->core != nullptr,
           "an NcclCommunicator needs a communicator");
}

NcclCommunicator::~NcclCommunicator() = default;  // the last owner of state_ destroys it

int NcclCommunicator::rank() const { return state_->core->rank; }
int NcclCommunicator::size() const { return state_->core->size; }
const std::string& NcclCommunicator::name() const { return state_->core->name; }

std::string NcclCommunicator::context(std::string_view operation) const {
  return state_->core->context(operation);
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
  const int size = state_->core->size, rank = state_->core->rank;
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
  const int size = state_->core->size, rank = state_->core->rank;
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
  TN_CHECK_AS(CommError, root >= 0 && root < state_->core->size, where, ": root ", root,
              " is out of range for a group of ", state_->core->size, " ranks");
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
  state_->core->throw_if_failed();
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
    TN_CHECK_AS(CommError, op.peer >= 0 && op.peer < state_->core->size, where, ": ", which,
                "peer ", op.peer, " is out of range for a group of ", state_->core->size,
                " ranks");
    TN_CHECK_AS(CommError, op.tag >= 0, where, ": ", which, "tag ", op.tag, " is negative");
  }
}

WorkHandle NcclCommunicator::barrier_async() {
  // NCCL has no barrier: an all-reduce of one float, whose wait() blocks the host until every
  // rank has joined it (the one Work here that does block the host: that is a barrier's point).
  Tensor token = Tensor::zeros({1}, DType::F32, Device::cuda(cuda::current_device()));
  const std::string where = context("barrier");
  return enqueue(
      state_, where, {token},
      [&](ncclComm_t comm, cudaStream_t stream) {
        TN_NCCL_CHECK_STARTED(ncclAllReduce(token.raw_data(), token.raw_data(), 1, ncclFloat32,
                                            ncclSum, comm, stream),
                              where);
      },
      NcclWork::HostWait::UntilDone);
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key,
                                                      const std::string& name) {
  const std::string where = context(detail::concat("split into '", name, "'"));
  NcclCore& core = *state_->core;
  core.throw_if_failed();
  cuda::bind_this_thread();
  const Clock::time_point deadline = Clock::now() + core.timeout;
  // What NCCL's background thread reads and writes until the split is done: the config and the
  // child's handle. On the heap, and leaked if we leave early (a failure recorded by the
  // watchdog ends our wait before NCCL's thread may have written the child), so that late
  // write never lands in a dead stack frame.
  struct SplitSlot {
    ncclConfig_t config;
    ncclComm_t child = nullptr;
  };
  auto slot = std::make_unique<SplitSlot>(SplitSlot{nonblocking_config()});
  std::atomic_ref<ncclComm_t> published(slot->child);
  try {
    const ncclResult_t started = core.with_comm(where, [&](ncclComm_t comm) {
      return ncclCommSplit(comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &slot->child,
                           &slot->config);
    });
    if (started != ncclSuccess && started != ncclInProgress)
      core.fail_and_throw(detail::concat(where, ": ncclCommSplit failed: ",
                                         detail::nccl_error_text(started), kAborted));
    // The parent is busy until the split's background work is done.
    core.wait_ready(where, deadline);
    if (color < 0) return nullptr;
    // NCCL versions differ in when they publish the child (at once, or when it is ready).
    Poller poller;
    while (published.load(std::memory_order_acquire) == nullptr) {
      if (Clock::now() >= deadline) core.fail_and_throw(core.timeout_message(where));
      poller.pause();
    }
  } catch (...) {
    (void)slot.release();  // NCCL's thread may still write into it
    throw;
  }
  ncclComm_t split_off = published.load(std::memory_order_acquire);
  ready_or_abort(split_off, where, deadline, core.timeout);
  int rank = 0, size = 0;
  try {
    TN_NCCL_CHECK(ncclCommUserRank(split_off, &rank), where);
    TN_NCCL_CHECK(ncclCommCount(split_off, &size), where);
  } catch (...) {
    (void)ncclCommAbort(split_off);
    throw;
  }
  return std::make_unique<NcclCommunicator>(
      std::make_shared<NcclCommState>(split_off, name, rank, size, core.timeout));
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
  Tensor everyone = Tensor::empty({state_->core->size * kHostNameBytes / 2}, DType::U16, device);
  all_gather(everyone, mine);
  Tensor everyone_host = Tensor::empty(everyone.shape(), DType::U16);
  everyone_host.copy_from(everyone);
  int color = state_->core->rank;
  for (int r = 0; r < state_->core->size; ++r) {
    if (std::memcmp(bytes_of(everyone_host) + r * kHostNameBytes, host_name, kHostNameBytes) == 0) {
      color = r;
      break;
    }
  }
  return split(color, state_->core->rank, name);
}

}  // namespace ternion
