#include "kernels/blas_check.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include <cblas.h>

namespace ternion {

bool blas_core_is_pre_avx2(const std::string& core) {
  std::string lower = core;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const std::set<std::string> kOld = {"prescott", "core2", "penryn", "dunnington",
                                             "nehalem", "sandybridge", "atom", "katmai",
                                             "coppermine", "northwood", "banias", "barcelona",
                                             "bobcat", "opteron", "opteron_sse3", "athlon"};
  return kOld.count(lower) > 0;
}

std::string blas_kernel_warning() {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";  // the user's choice
  const char* name = openblas_get_corename();
  if (name == nullptr || !blas_core_is_pre_avx2(name)) return "";
  const char* suited = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                         : nullptr;
  if (suited == nullptr) return "";
  return std::string("OpenBLAS uses its ") + name + " kernels on this CPU, which has " +
         (std::string(suited) == "SkylakeX" ? "AVX-512" : "AVX2") +
         " (this OpenBLAS does not know the model): its GEMMs run several times slower than "
         "they can; set OPENBLAS_CORETYPE=" + suited + " in the environment to use them";
#else
  return "";
#endif
}

}  // namespace ternion
