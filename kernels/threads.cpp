#include "kernels/threads.h"

#include <cblas.h>
#include <omp.h>

#include "framework/error.h"

namespace ternion {

void set_num_threads(int threads) {
  TN_CHECK(threads > 0, "thread count ", threads);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);  // the pthreads build of OpenBLAS has its own pool
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace ternion
