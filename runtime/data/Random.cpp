// Seed rules and uniform draws of the data layer.
#include "runtime/data/Random.h"

namespace prism::runtime::data {

uint64_t uniformBelow(std::mt19937_64 &gen, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(gen()) * n) >> 64);
}

double unitUniform(std::mt19937_64 &gen) {
  return static_cast<double>(gen() >> 11) * (1.0 / 9007199254740992.0);
}

} // namespace prism::runtime::data
