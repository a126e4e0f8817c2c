// What CPU a benchmark ran on and which vector instructions this build uses, for the first
// lines of its output: the same source runs 2-10x apart on AVX2 and AVX-512 machines, so a
// figure means little without them.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace ternion::bench {

// "AMD EPYC 9R14 (avx2 fma avx512f avx512bw avx512vl); this build: AVX-512" from
// /proc/cpuinfo's first processor and the compiler's target macros.
inline std::string cpu_description() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU", flags;
  while (std::getline(cpuinfo, line)) {
    const std::size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon), value = line.substr(colon + 2);
    if (key.rfind("model name", 0) == 0 && model == "unknown CPU") model = value;
    if (key.rfind("flags", 0) == 0 && flags.empty()) flags = " " + value + " ";
  }
  std::ostringstream out;
  out << model << " (";
  const char* separator = "";
  for (const char* extension : {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl"}) {
    std::string needle = " ";  // a whole word of the flags, not a prefix of a longer one
    needle.append(extension).push_back(' ');
    if (flags.find(needle) == std::string::npos) continue;
    out << separator << extension;
    separator = " ";
  }
  out << "); this build: ";
#if defined(__AVX512F__)
  out << "AVX-512";
#elif defined(__AVX2__)
  out << "AVX2";
#elif defined(__AVX__)
  out << "AVX";
#else
  out << "SSE2";
#endif
  return out.str();
}

}  // namespace ternion::bench
