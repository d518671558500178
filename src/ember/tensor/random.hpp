// Counter-based random numbers: value i of a stream depends only on (seed, i), so a tensor filled
// on the CPU, on a GPU, or by any number of threads holds the same values for the same seed.
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/core/half.hpp"

namespace ember::random {

// SplitMix64's finaliser: a bijective 64-bit mixer with good avalanche.
EMBER_HOST_DEVICE inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A bijective 32-bit mixer (multiply-xorshift, the constants of MurmurHash3's finaliser): for
// per-value hashing on a GPU, whose integer units are 32 bits wide (a 64-bit multiply takes
// several instructions).
EMBER_HOST_DEVICE inline std::uint32_t mix32(std::uint32_t h) {
  h = (h ^ (h >> 16)) * 0x85ebca6bu;
  h = (h ^ (h >> 13)) * 0xc2b2ae35u;
  return h ^ (h >> 16);
}

// bits(seed, index) with mix64(seed) worked out once by the caller (a kernel drawing many
// counters of one stream).
EMBER_HOST_DEVICE inline std::uint64_t bits_of_mixed(std::uint64_t mixed_seed,
                                                     std::uint64_t index) {
  return mix64(mixed_seed ^ (index * 0xd1b54a32d192ed03ull));
}

// 64 random bits for counter `index` of stream `seed`.
EMBER_HOST_DEVICE inline std::uint64_t bits(std::uint64_t seed, std::uint64_t index) {
  return bits_of_mixed(mix64(seed), index);
}

// Uniform in [0, 1) with 53 random bits.
EMBER_HOST_DEVICE inline double uniform01(std::uint64_t seed, std::uint64_t index) {
  return static_cast<double>(bits(seed, index) >> 11) * 0x1.0p-53;
}

// Standard normal by Box-Muller over two counters derived from `index`.
EMBER_HOST_DEVICE inline double normal01(std::uint64_t seed, std::uint64_t index) {
  const double u1 = 1.0 - uniform01(seed, 2 * index);  // (0, 1]: log is finite
  const double u2 = uniform01(seed, 2 * index + 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

}  // namespace ember::random
