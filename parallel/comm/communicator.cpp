#include "parallel/comm/communicator.h"

#include "framework/error.h"

namespace ternion {

ChunkRange chunk_range(std::int64_t n, std::int64_t parts, std::int64_t index) {
  TN_CHECK(n >= 0 && parts > 0 && index >= 0 && index < parts, "chunk ", index, " of ", parts,
           " over ", n, " elements");
  const std::int64_t base = n / parts, larger = n % parts;
  // The first `larger` chunks hold base + 1 elements, the rest base.
  const std::int64_t begin = index * base + (index < larger ? index : larger);
  return {begin, begin + base + (index < larger ? 1 : 0)};
}

}  // namespace ternion
