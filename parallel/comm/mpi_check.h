// TN_MPI_CHECK: the MPI member of the check-macro family (TN_CHECK, TN_CUDA_CHECK, ...).
//
//   TN_MPI_CHECK(MPI_Iallreduce(...), context);
//
// Every communicator runs with MPI_ERRORS_RETURN, so a failed MPI call returns its error code
// instead of killing the job; this turns it into a CommError naming the call, the context
// (operation, group and rank: "all_reduce on group 'world' (rank 1 of 4)"), MPI's own error
// string and our file:line.
#pragma once

#include <mpi.h>

#include <string>

#include "framework/error.h"

namespace ternion {

// MPI_Error_string of `code` ("MPI_ERR_TRUNCATE: message truncated").
std::string mpi_error_string(int code);

}  // namespace ternion

#define TN_MPI_CHECK(call, context)                                                       \
  do {                                                                                    \
    const int tn_mpi_status_ = (call);                                                    \
    if (tn_mpi_status_ != MPI_SUCCESS)                                                    \
      TN_THROW(CommError, context,                                                        \
               ": " #call " failed: ", ::ternion::mpi_error_string(tn_mpi_status_), " (", \
               __FILE__, ":", __LINE__, ")");                                             \
  } while (0)
