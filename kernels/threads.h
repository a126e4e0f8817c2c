// The number of threads CPU kernels use (OpenMP loops and OpenBLAS alike). With several ranks
// on one machine, each rank should get cores / local ranks; oversubscribing spin-waiting
// thread pools costs far more than it gains.
#pragma once

namespace ternion {

void set_num_threads(int threads);  // > 0
int num_threads();

}  // namespace ternion
