// Seed rules and uniform draws of the data layer.
#include "runtime/data/Random.h"

namespace prism::runtime::data {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t fnv1a64(llvm::StringRef text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t streamSeed(uint64_t seed, llvm::StringRef name) {
  return splitmix64(seed ^ fnv1a64(name));
}

uint64_t uniformBelow(std::mt19937_64 &gen, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(gen()) * n) >> 64);
}

double unitUniform(std::mt19937_64 &gen) {
  return static_cast<double>(gen() >> 11) * (1.0 / 9007199254740992.0);
}

} // namespace prism::runtime::data
