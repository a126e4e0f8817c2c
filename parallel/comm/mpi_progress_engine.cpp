#include "parallel/comm/mpi_progress_engine.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "framework/error.h"
#include "parallel/comm/flight_recorder.h"
#include "parallel/comm/mpi_check.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion {

namespace {

using Clock = std::chrono::steady_clock;

// Polling: while an operation has made progress recently the thread spins (yielding the core
// to anyone who wants it), because large transfers through shared memory move only while some
// MPI call is progressing them. After kSpinWindow without any completion (a pipeline stage
// waiting for its neighbour, say) it sleeps between polls so that it stops taking a core from
// the computation it is meant to overlap.
constexpr auto kSpinWindow = std::chrono::milliseconds(5);
constexpr auto kIdleSleep = std::chrono::microseconds(50);
// How long shutdown waits for unfinished operations (a peer that never joins a collective)
// before failing them.
constexpr auto kShutdownDrain = std::chrono::seconds(10);

// A blocking MPI call (MPI_Comm_split, MPI_Comm_free, ...) funnelled through the thread.
class CallOperation final : public MpiOperation {
 public:
  explicit CallOperation(std::function<void()> call) : call_(std::move(call)) {}
  std::string describe() const override { return "a funnelled MPI call"; }
  void start(std::vector<MPI_Request>& /*requests*/) override { call_(); }

 private:
  std::function<void()> call_;
};

std::mutex g_engine_mutex;
std::unique_ptr<MpiProgressEngine> g_engine;

}  // namespace

void MpiWork::wait() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return completed_.load(std::memory_order_relaxed); });
  if (error_) std::rethrow_exception(error_);
}

void MpiWork::complete(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
    completed_.store(true, std::memory_order_release);
  }
  done_.notify_all();
}

MpiProgressEngine& MpiProgressEngine::instance() {
  std::lock_guard lock(g_engine_mutex);
  TN_CHECK_AS(CommError, MpiRuntime::initialized(),
              "MPI is not initialised: construct ternion::MpiRuntime in main before using an "
              "MPI communicator");
  if (!g_engine) g_engine.reset(new MpiProgressEngine());
  return *g_engine;
}

void MpiProgressEngine::shut_down() noexcept {
  std::lock_guard lock(g_engine_mutex);
  g_engine.reset();
}

MpiProgressEngine::MpiProgressEngine() : thread_([this] { loop(); }) {}

MpiProgressEngine::~MpiProgressEngine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

WorkHandle MpiProgressEngine::submit(std::unique_ptr<MpiOperation> operation) {
  auto work = std::make_shared<MpiWork>();
  {
    std::lock_guard lock(mutex_);
    TN_CHECK(!stopping_, "operation submitted while the MPI progress thread shuts down");
    queue_.push_back({std::move(operation), work});
  }
  wake_.notify_one();
  return work;
}

void MpiProgressEngine::run(std::function<void()> call, std::uint64_t flight_id,
                            std::shared_ptr<MpiGroupState> group) {
  if (std::this_thread::get_id() == thread_.get_id()) {
    if (group && group->broken()) std::rethrow_exception(group->failure());
    call();
    return;
  }
  auto operation = std::make_unique<CallOperation>(std::move(call));
  operation->flight_id = flight_id;
  if (group) operation->count_on(std::move(group));
  submit(std::move(operation))->wait();
}

void MpiProgressEngine::loop() {
  Clock::time_point last_progress = Clock::now();
  Clock::time_point drain_deadline = Clock::time_point::max();
  while (true) {
    std::deque<Pending> incoming;
    {
      std::unique_lock lock(mutex_);
      if (queue_.empty() && active_.empty()) {
        wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;  // stopping with nothing left
      }
      if (stopping_ && drain_deadline == Clock::time_point::max())
        drain_deadline = Clock::now() + kShutdownDrain;
      incoming.swap(queue_);
    }
    bool progressed = !incoming.empty();
    for (Pending& pending : incoming) start(std::move(pending));
    for (std::size_t i = 0; i < active_.size();) {
      if (poll(active_[i])) {
        complete(active_[i]);
        active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
        progressed = true;
      } else {
        ++i;
      }
    }
    const Clock::time_point now = Clock::now();
    if (now >= drain_deadline) {
      // A peer never joined these; fail them so that nobody waits forever. Their requests
      // stay with MPI, which MPI_Finalize tears down.
      for (Active& active : active_) {
        active.error = std::make_exception_ptr(CommError(
            active.operation->describe() +
            ": still unfinished when the MPI runtime shut down (did every rank take part?)"));
        complete(active);
      }
      active_.clear();
      std::lock_guard lock(mutex_);
      if (queue_.empty()) return;
      continue;
    }
    if (progressed) {
      last_progress = now;
    } else if (now - last_progress < kSpinWindow) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kIdleSleep);
    }
  }
}

void MpiProgressEngine::start(Pending pending) {
  Active active;
  active.operation = std::move(pending.operation);
  active.work = std::move(pending.work);
  if (const MpiGroupState* group = active.operation->group.get(); group && group->broken()) {
    active.error = group->failure();  // no MPI call: the peers are out of step with us
    complete(active);
    return;
  }
  if (const std::uint64_t id = active.operation->flight_id; id != 0)
    FlightRecorder::instance().started(id);
  try {
    active.operation->start(active.requests);
  } catch (...) {
    // This rank has not joined the operation its peers may be in. Requests issued before the
    // failure still have to drain before the Work completes.
    fail(active, std::current_exception(), /*breaks_group=*/true);
  }
  if (active.requests.empty()) {
    complete(active);
  } else {
    active_.push_back(std::move(active));
  }
}

bool MpiProgressEngine::poll(Active& active) {
  const auto count = active.requests.size();
  if (indices_.size() < count) {
    indices_.resize(count);
    statuses_.resize(count);
  }
  int completed = 0;
  const int status = MPI_Testsome(static_cast<int>(count), active.requests.data(), &completed,
                                  indices_.data(), statuses_.data());
  if (status != MPI_SUCCESS && status != MPI_ERR_IN_STATUS) {
    // The requests' state is unknown: give up on them rather than poll them forever.
    fail(active,
         std::make_exception_ptr(CommError(active.operation->describe() +
                                           ": MPI_Testsome failed: " + mpi_error_string(status))),
         /*breaks_group=*/true);
    return true;
  }
  if (completed == MPI_UNDEFINED) return true;  // every request is already done
  for (int k = 0; k < completed; ++k) {
    const auto index = static_cast<std::size_t>(indices_[static_cast<std::size_t>(k)]);
    const MPI_Status& request_status = statuses_[static_cast<std::size_t>(k)];
    // MPI sets the statuses' MPI_ERROR fields only when it returns MPI_ERR_IN_STATUS.
    if (status == MPI_ERR_IN_STATUS && request_status.MPI_ERROR != MPI_SUCCESS) {
      // Open MPI leaves a failed request allocated, and would report it again: free it.
      if (active.requests[index] != MPI_REQUEST_NULL) MPI_Request_free(&active.requests[index]);
      int error_class = MPI_ERR_OTHER;
      MPI_Error_class(request_status.MPI_ERROR, &error_class);
      fail(active,
           std::make_exception_ptr(CommError(active.operation->describe_request(index) + ": " +
                                             mpi_error_string(request_status.MPI_ERROR))),
           !(active.operation->is_point_to_point() && error_class == MPI_ERR_TRUNCATE));
      continue;
    }
    if (active.error) continue;
    try {
      active.operation->request_done(index, request_status);
    } catch (...) {
      // Our own check of a transfer MPI completed (a short message): still in step.
      fail(active, std::current_exception(), /*breaks_group=*/false);
    }
  }
  // Completed requests are MPI_REQUEST_NULL now; the operation is done when all are.
  return std::all_of(active.requests.begin(), active.requests.end(),
                     [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
}

void MpiProgressEngine::fail(Active& active, std::exception_ptr error, bool breaks_group) {
  if (breaks_group && active.operation->group) active.operation->group->break_with(error);
  if (!active.error) active.error = std::move(error);
}

void MpiProgressEngine::complete(Active& active) {
  if (!active.error) {
    try {
      active.operation->finish();
    } catch (...) {
      active.error = std::current_exception();
    }
  }
  if (const std::uint64_t id = active.operation->flight_id; id != 0) {
    std::string error;
    if (active.error) {
      try {
        std::rethrow_exception(active.error);
      } catch (const std::exception& e) {
        error = e.what();
      } catch (...) {
        error = "unknown error";
      }
      request_flight_record();  // a failed operation: the record says what came before
    }
    FlightRecorder::instance().ended(id, error);
  }
  // Drop the operation (and the buffers it keeps alive) before the caller may reuse them.
  active.operation.reset();
  active.work->complete(active.error);
}

}  // namespace ternion
