// Seed rules of the data layer: every random choice it makes is a pure function of a 64-bit seed,
// drawn with integer arithmetic spelled out here so any implementation can reproduce it.
#pragma once

#include <cstdint>
#include <random>

#include "runtime/SeedRule.h"
#include "llvm/ADT/StringRef.h"

namespace prism::runtime::data {

using runtime::fnv1a64;
using runtime::splitmix64;
using runtime::streamSeed;
// 64-bit FNV-1a of the bytes of `text`.

// A uniform integer in [0, n) from one draw: the high 64 bits of draw * n. (Its bias, below
// n / 2^64, is invisible at data-set sizes; unlike std::uniform_int_distribution it is the same
// in every standard library.)
uint64_t uniformBelow(std::mt19937_64 &gen, uint64_t n);
// A uniform double in [0, 1) from the top 53 bits of one draw.
double unitUniform(std::mt19937_64 &gen);

} // namespace prism::runtime::data
