// The OpenBLAS kernel warning against this machine: it names the OPENBLAS_CORETYPE that suits
// the CPU exactly when OpenBLAS runs pre-AVX2 kernels on a CPU with AVX2 or AVX-512, and says
// nothing once the user has chosen.
#include "kernels/blas_check.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace ternion {
namespace {

TEST(BlasCheck, KnowsThePreAvx2Cores) {
  EXPECT_TRUE(blas_core_is_pre_avx2("Prescott"));
  EXPECT_TRUE(blas_core_is_pre_avx2("SANDYBRIDGE"));
  EXPECT_FALSE(blas_core_is_pre_avx2("Haswell"));
  EXPECT_FALSE(blas_core_is_pre_avx2("SkylakeX"));
  EXPECT_FALSE(blas_core_is_pre_avx2("Zen"));
}

TEST(BlasCheck, WarnsOnlyWhereGenericKernelsRunOnAVectorCpu) {
  // The machine may set it (OpenBLAS read it when it loaded); the check is of the rest.
  const char* preset = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = preset != nullptr ? preset : "";
  unsetenv("OPENBLAS_CORETYPE");
  const std::string core = openblas_get_corename();
  const bool generic = blas_core_is_pre_avx2(core);
  const std::string warning = blas_kernel_warning();
#if defined(__x86_64__)
  const bool vector_cpu = __builtin_cpu_supports("avx2");
  if (generic && vector_cpu) {
    const std::string suited = __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell";
    EXPECT_NE(warning.find("OPENBLAS_CORETYPE=" + suited), std::string::npos) << warning;
    EXPECT_NE(warning.find(openblas_get_corename()), std::string::npos) << warning;
  } else {
    EXPECT_EQ(warning, "") << "core " << core;
  }
#endif
  setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  EXPECT_EQ(blas_kernel_warning(), "");
  if (saved.empty()) unsetenv("OPENBLAS_CORETYPE");
  else setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
}

}  // namespace
}  // namespace ternion
