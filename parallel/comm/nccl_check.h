// TN_NCCL_CHECK: the NCCL member of the check-macro family (TN_CHECK, TN_CUDA_CHECK,
// TN_MPI_CHECK, ...).
//
//   TN_NCCL_CHECK(ncclCommCount(comm, &n), context);          // must return ncclSuccess
//   TN_NCCL_CHECK_STARTED(ncclAllReduce(...), context);       // ncclInProgress is fine too
//
// `context` says what was being done and where ("all_reduce on group 'tp[0,1]' (rank 1 of 2)").
// A failure throws CommError with the context, the failed statement, NCCL's error string, the
// last error NCCL logged (ncclGetLastError: often the useful part, "peer 3 closed the
// connection") and our file:line. A communicator created non-blocking (parallel/comm/cuda/
// nccl_communicator.h) answers ncclInProgress while an operation is still being set up in the
// background; the _STARTED form accepts that, and the caller polls ncclCommGetAsyncError.
//
// Only CUDA builds include this header.
#pragma once

#include <nccl.h>

#include <string>

#include "framework/error.h"

namespace ternion::detail {

// "unhandled system error (...); last NCCL error: ..." (the second part when NCCL has one).
inline std::string nccl_error_text(ncclResult_t status) {
  std::string text = ncclGetErrorString(status);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') text += std::string("; last NCCL error: ") + last;
  return text;
}

}  // namespace ternion::detail

#define TN_NCCL_CHECK_RESULT(call, context, accept_in_progress)                              \
  do {                                                                                       \
    const ncclResult_t tn_nccl_status_ = (call);                                             \
    if (tn_nccl_status_ != ncclSuccess &&                                                    \
        !((accept_in_progress) && tn_nccl_status_ == ncclInProgress))                        \
      TN_THROW(CommError, context, ": " #call " failed: ",                                   \
               ::ternion::detail::nccl_error_text(tn_nccl_status_), " (", __FILE__, ":",     \
               __LINE__, ")");                                                               \
  } while (0)

#define TN_NCCL_CHECK(call, context) TN_NCCL_CHECK_RESULT(call, context, false)
#define TN_NCCL_CHECK_STARTED(call, context) TN_NCCL_CHECK_RESULT(call, context, true)
