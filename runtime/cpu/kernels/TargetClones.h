// PRISM_TARGET_CLONES: marks a hot kernel loop to be compiled once per x86-64 level (AVX-512,
// AVX2 with FMA, baseline SSE2) and picked by the CPU's features when the program loads (GCC
// function multiversioning). Prism is built for baseline x86-64, not -march=native, so that one
// binary runs on every x86-64 CPU (runtime/cpu/CMakeLists.txt says why).
//
// Put it on a function that holds a whole loop: what the loop calls (functors, FastMath.h) is
// inlined into each clone and vectorized for its level, while the clone itself is reached
// through one indirect call. A helper that is not inlined stays a baseline function, so
// helpers with loops of their own that clones call are PRISM_ALWAYS_INLINE (GCC's heuristics
// decline larger ones). A clone cannot hold an OpenMP region (the region's body is outlined
// before cloning and would stay baseline): call cloned loops from inside the region.
#pragma once

#if defined(__GNUC__)
#define PRISM_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define PRISM_ALWAYS_INLINE inline
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// x86-64-v4 is AVX-512 (F, BW, CD, DQ, VL), x86-64-v3 is AVX2, FMA, BMI1/2 and F16C. Levels,
// not single extensions, so that each clone gets FMA, and its arch and tuning stay those of the
// baseline: GCC inlines baseline functions into a clone only when they agree.
#define PRISM_TARGET_CLONES                                                                        \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PRISM_TARGET_CLONES
#endif
