// Every build-time feature and version gate lives here, so the rest of the code asks one
// question (`if constexpr (kHaveCuda)` or `#if TN_HAVE_CUDA`) instead of scattering #ifs.
#pragma once

#ifndef TN_HAVE_CUDA
#define TN_HAVE_CUDA 0
#endif

// cudnn-frontend's headers were found (CMakeLists.txt; kernels/cuda/cudnn_attention.cpp only).
#ifndef TN_HAVE_CUDNN_FRONTEND
#define TN_HAVE_CUDNN_FRONTEND 0
#endif

#ifdef _OPENMP
#define TN_HAVE_OPENMP 1
#else
#define TN_HAVE_OPENMP 0
#endif

// Functions whose math is shared between CPU kernels and CUDA kernels are marked with this.
#if defined(__CUDACC__)
#define TN_HOST_DEVICE __host__ __device__
#else
#define TN_HOST_DEVICE
#endif

namespace ternion {
inline constexpr bool kHaveCuda = TN_HAVE_CUDA;
inline constexpr bool kHaveOpenMp = TN_HAVE_OPENMP;
}  // namespace ternion
