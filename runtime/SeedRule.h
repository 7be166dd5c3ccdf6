// The seed rule shared by everything random in the runtime (initial values, synthetic data,
// data order): a named stream's generator is seeded with splitmix64(seed ^ fnv1a64(name)), so
// every draw is a pure function of the global seed and the name (docs/runtime.md).
#pragma once

#include <cstdint>

#include "llvm/ADT/StringRef.h"

namespace prism::runtime {

// The splitmix64 finalizer: a bijective mix of 64 bits.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 64-bit FNV-1a of the bytes of `text`; `h`: the hash of the bytes before them, to hash a
// sequence of pieces.
inline uint64_t fnv1a64(llvm::StringRef text, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// The seed of the named stream.
inline uint64_t streamSeed(uint64_t seed, llvm::StringRef name) {
  return splitmix64(seed ^ fnv1a64(name));
}

} // namespace prism::runtime
