// The OpenBLAS kernel warning against this machine: it names the OPENBLAS_CORETYPE that suits
// the CPU exactly when OpenBLAS runs pre-AVX2 kernels on a CPU with AVX2 or AVX-512, and says
// nothing once the user has chosen.
#include "kernels/blas_check.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace ternion {
namespace {

TEST(BlasCheck, WarnsOnlyWhereGenericKernelsRunOnAVectorCpu) {
  // The machine may set it (OpenBLAS read it when it loaded); the check is of the rest.
  const char* preset = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = preset != nullptr ? preset : "";
  unsetenv("OPENBLAS_CORETYPE");
  std::string core = openblas_get_corename();
  std::transform(core.begin(), core.end(), core.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool generic = core == "prescott" || core == "core2" || core == "nehalem" ||
                       core == "sandybridge" || core == "penryn" || core == "atom";
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
