// The one progress thread that drives every MPI operation of this process.
//
// A caller enqueues an MpiOperation and gets an MpiWork at once. The progress thread takes
// the queue in submission order, starts each operation (its non-blocking MPI calls), and
// polls the started ones with MPI_Testsome until all their requests are done; then it runs the
// operation's finish step (Average's division) and completes the Work. Because this thread is
// the only one that calls MPI after MPI_Init (blocking calls such as MPI_Comm_split are
// funnelled through it with run()), MPI_THREAD_SERIALIZED is enough.
//
// Submission order is start order: collectives that all ranks submit in the same order on a
// communicator start in that order everywhere, which is what MPI requires. Operations on
// different communicators never wait for each other, so groups can be used interleaved.
//
// A failure that leaves this rank out of step with its peers on a communicator (a collective
// it did not join, an MPI error inside one) breaks that communicator: the thread starts none of
// its later operations and fails each with the first failure's CommError, as the NCCL backend
// does. Started, MPI would pair them with the peers' earlier, still pending operations (a
// larger message landing in a smaller buffer). The rank's error path then ends the job.
//
// The thread starts on the first submission and is joined by MpiRuntime's destructor
// (shut_down), which first lets started and queued operations finish, within a deadline.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "parallel/comm/comm_watchdog.h"
#include "parallel/comm/work.h"

namespace ternion {

// What the operations of one communicator share: how many have not ended, and whether an
// earlier one broke it (see above).
class MpiGroupState {
 public:
  std::atomic<int> unfinished{0};
  bool broken() const noexcept { return broken_.load(std::memory_order_acquire); }
  // The first failure; valid once broken() is true.
  const std::exception_ptr& failure() const noexcept { return failure_; }
  // Progress thread only (the one writer): records `failure` unless one is recorded already.
  void break_with(std::exception_ptr failure) noexcept {
    if (broken()) return;
    failure_ = std::move(failure);
    broken_.store(true, std::memory_order_release);
  }

 private:
  std::atomic<bool> broken_{false};
  std::exception_ptr failure_;  // written once, before broken_
};

// One asynchronous MPI operation. All three steps run on the progress thread and report
// failure by throwing (CommError).
class MpiOperation {
 public:
  virtual ~MpiOperation() {
    if (group) group->unfinished.fetch_sub(1, std::memory_order_release);
  }
  // For error messages: "all_reduce on group 'world' (rank 1 of 4)".
  virtual std::string describe() const = 0;
  // The same for one of its requests, when MPI reports that request failed.
  virtual std::string describe_request(std::size_t /*index*/) const { return describe(); }
  // Point to point: a truncated receive does not break the group, as MPI has matched and
  // consumed the message; both sides stay in step.
  virtual bool is_point_to_point() const { return false; }
  // Issues the non-blocking MPI calls, appending one request per call. An operation that
  // appends none (a funnelled blocking call) is complete when start returns.
  virtual void start(std::vector<MPI_Request>& requests) = 0;
  // Request `index` (in the order start appended it) completed without an MPI error.
  virtual void request_done(std::size_t /*index*/, const MPI_Status& /*status*/) {}
  // Every request completed; the last step before the Work is marked complete.
  virtual void finish() {}
  // Its entry in the flight recorder (parallel/comm/flight_recorder.h); 0: not recorded.
  std::uint64_t flight_id = 0;
  // Its communicator's state, whose count of unfinished operations this one leaves on
  // destruction (null: an operation of no communicator).
  std::shared_ptr<MpiGroupState> group;
  void count_on(std::shared_ptr<MpiGroupState> state) {
    state->unfinished.fetch_add(1, std::memory_order_relaxed);
    group = std::move(state);
  }
};

class MpiWork final : public Work {
 public:
  bool is_completed() override { return completed_.load(std::memory_order_acquire); }
  void wait() override;
  // Marks the work complete; `error` (null on success) is rethrown by every wait().
  void complete(std::exception_ptr error);

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  std::atomic<bool> completed_{false};
  std::exception_ptr error_;
};

class MpiProgressEngine {
 public:
  // The process's engine, its thread started on first use. Throws CommError when MPI is not
  // initialised or has been shut down.
  static MpiProgressEngine& instance();
  // Drains and joins the thread; called by ~MpiRuntime before MPI_Finalize. Later calls to
  // instance() throw.
  static void shut_down() noexcept;

  WorkHandle submit(std::unique_ptr<MpiOperation> operation);
  // Runs `call` on the progress thread in submission order and waits for it; rethrows what
  // it threw. Runs it directly when called from the progress thread itself. `flight_id`: its
  // entry in the flight recorder, if it has one; `group`: the communicator it is collective
  // over, whose failure it rethrows instead of running when that one is broken.
  void run(std::function<void()> call, std::uint64_t flight_id = 0,
           std::shared_ptr<MpiGroupState> group = nullptr);

  ~MpiProgressEngine();
  MpiProgressEngine(const MpiProgressEngine&) = delete;
  MpiProgressEngine& operator=(const MpiProgressEngine&) = delete;

 private:
  struct Pending {
    std::unique_ptr<MpiOperation> operation;
    std::shared_ptr<MpiWork> work;
  };
  struct Active {
    std::unique_ptr<MpiOperation> operation;
    std::shared_ptr<MpiWork> work;
    std::vector<MPI_Request> requests;  // MPI_REQUEST_NULL once done
    std::exception_ptr error;           // the first failure; the rest of the requests still drain
  };

  MpiProgressEngine();
  void loop();
  void start(Pending pending);
  bool poll(Active& active);  // true once the operation is finished
  // Records the operation's first failure; `breaks_group`: this rank is out of step with its
  // peers on the operation's communicator from here on.
  static void fail(Active& active, std::exception_ptr error, bool breaks_group);
  static void complete(Active& active);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  // Progress thread only.
  std::vector<Active> active_;
  std::vector<int> indices_;  // MPI_Testsome's scratch arrays
  std::vector<MPI_Status> statuses_;
  std::thread thread_;
  CommWatchdog watchdog_;  // ends the job when an operation hangs
};

}  // namespace ternion
