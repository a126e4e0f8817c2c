#include "layers/recompute.h"

namespace ternion {

bool parse_recompute(const std::string& text, Recompute& mode) {
  if (text == "none") mode = Recompute::none;
  else if (text == "selective") mode = Recompute::selective;
  else if (text == "full") mode = Recompute::full;
  else return false;
  return true;
}

}  // namespace ternion
