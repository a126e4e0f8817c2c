// OpenBLAS picks its kernels by CPU model when it loads. A model newer than the library (an
// Intel Sapphire or Emerald Rapids under Debian 12's OpenBLAS 0.3.21, say) falls back to the
// generic Prescott (SSE3) kernels, which run sgemm 5-10x slower than the CPU's AVX2 or
// AVX-512 allows (32 against 330 GFLOP/s on 2 cores of an Emerald Rapids). The library's
// own override is OPENBLAS_CORETYPE; this says when to use it.
#pragma once

#include <string>

namespace ternion {

// "OpenBLAS uses its generic Prescott kernels on this CPU, which has AVX-512: ..." with the
// OPENBLAS_CORETYPE that matches it; "" when the kernels suit the CPU, when
// OPENBLAS_CORETYPE is already set, or on a CPU without AVX2.
std::string blas_kernel_warning();

// Whether `core` (openblas_get_corename(), any case) names kernels older than AVX2: what
// OpenBLAS falls back to on an x86-64 CPU it does not know.
bool blas_core_is_pre_avx2(const std::string& core);

}  // namespace ternion
