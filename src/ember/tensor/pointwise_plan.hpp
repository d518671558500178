// How a CUDA pointwise op is cut into kernel launches, decided on the host by plain (non-template)
// code: compiled once, cheap to compile, and testable on a machine without a GPU. The kernels
// (cuda_apply.cuh) only execute these decisions.
//
// Paths:
//  1. Vectorised: after coalescing, one dense dimension in which the output has unit stride and
//     every input has unit stride or stride 0 (a repeated value, or an immediate). A thread moves
//     V elements per access, V = 16 / the largest element size, so the widest operand moves 16
//     bytes at a time. The output's address decides a head of h < V elements done singly, so that
//     the body starts on a V-element boundary; every dense input must then sit on its own vector
//     boundary (each operand's pointer is checked), otherwise path 2 is taken. The last
//     (n - h) mod V elements form a tail, also done singly.
//  2. Strided: any strides. The kernel turns a linear index into per-operand offsets by peeling
//     dimensions innermost first with FastDivmod: a multiply-high and a shift per dimension, no
//     hardware divide.
// Both paths use 32-bit indices. Work with more than 2^31 - 1 elements, or offsets beyond that,
// is cut into pieces that fit (for_each_32bit_piece), each its own launch with 64-bit base
// offsets applied on the host: that is the 64-bit fallback, and no kernel carries 64-bit index
// arithmetic.
//
// fmt-free (included by .cu files).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ember/tensor/fast_divmod.hpp"
#include "ember/tensor/shape.hpp"

namespace ember {

// The output and up to three inputs.
inline constexpr int kMaxPointwiseOperands = 4;

// Path 2's geometry: dimensions innermost first; operand 0 is the output.
struct StridedGeometry {
  int rank = 1;  // >= 1
  FastDivmod sizes[kMaxRank];
  std::uint32_t strides[kMaxRank][kMaxPointwiseOperands];
};

// Path 2's index math: the element offsets of linear index `linear` for the first N operands,
// dimensions peeled innermost first with FastDivmod; the outermost needs no division (what is
// left of the index is its coordinate). Shared by the kernel and the CPU tests. The loops have
// constant trip counts, which nvcc unrolls at -O3, keeping `offset` in registers.
template <int N>
EMBER_HOST_DEVICE inline void offsets_of(const StridedGeometry& g, std::uint32_t linear,
                                         std::uint32_t (&offset)[N]) {
  for (int k = 0; k < N; ++k)
    offset[k] = 0;
  for (int d = 0; d < kMaxRank; ++d) {
    if (d == g.rank - 1) {
      for (int k = 0; k < N; ++k)
        offset[k] += linear * g.strides[d][k];
      break;
    }
    std::uint32_t quotient, coordinate;
    g.sizes[d].divmod(linear, quotient, coordinate);
    for (int k = 0; k < N; ++k)
      offset[k] += coordinate * g.strides[d][k];
    linear = quotient;
  }
}

// The vectorised kernels (pointwise path 1 and the all-element reduction) walk their vectors in
// grid steps: each of `threads` threads takes U vectors per step (the two kernels lay them out
// differently), its step's first index advancing by U * threads while it is below `vectors`.
// Their 32-bit indices reach vectors + U * threads; this says whether that stays below 2^32 (with
// a margin of another U * threads). It holds for any piece (vectors < 2^31 / V, V >= 2) with a
// one-wave grid or one step per thread, and launches check it anyway.
inline bool grid_steps_fit_32bit(std::uint64_t threads, std::uint64_t vectors, int unroll) {
  return vectors + 2 * static_cast<std::uint64_t>(unroll) * threads < (std::uint64_t{1} << 32);
}

// One kernel launch.
struct PointwiseLaunch {
  bool vectorised = false;
  std::uint32_t n = 0;  // elements in this launch
  // Element offset of each operand's first element, relative to its data pointer.
  std::array<std::int64_t, kMaxPointwiseOperands> offset{};
  // Path 1: elements done singly before the first vector, whole vectors after them, and which
  // operands are dense (the others are one repeated value).
  std::uint32_t head = 0, vectors = 0;
  std::array<bool, kMaxPointwiseOperands> dense{};
  // Path 2.
  StridedGeometry geometry;
};

// The operands of one op. Operand 0 is the output; an input with data == nullptr is an immediate
// value (it never moves). Strides are over the common shape (0 for broadcast dimensions).
struct PointwiseOperands {
  int count = 1;
  std::array<const void*, kMaxPointwiseOperands> data{};
  std::array<Strides, kMaxPointwiseOperands> strides{};
  std::array<std::size_t, kMaxPointwiseOperands> element_size{};
};

// The launches for `shape` (nonempty). vector_width is V, or 1 to never vectorise.
std::vector<PointwiseLaunch> plan_pointwise(const Shape& shape, const PointwiseOperands& operands,
                                            int vector_width);

// The bytes one launch reads and writes: the output, and each input held in memory, except an
// input that a vectorised launch reads as one repeated value (read once per thread, not per
// element). Compared with the L2 size to choose the launch's cache policy.
std::uint64_t launch_bytes(const PointwiseLaunch& launch, const PointwiseOperands& operands);

}  // namespace ember
