#include "ember/tensor/pointwise_plan.hpp"

#include <algorithm>

#include "ember/tensor/iteration.hpp"

namespace ember {

namespace {

constexpr int N = kMaxPointwiseOperands;

std::uintptr_t address_of(const PointwiseOperands& ops, int k, std::int64_t offset) {
  return reinterpret_cast<std::uintptr_t>(ops.data[static_cast<std::size_t>(k)]) +
         static_cast<std::uintptr_t>(offset) * ops.element_size[static_cast<std::size_t>(k)];
}

// Path 1 for a rank-1 piece, if every operand allows it.
bool try_vectorise(const IterationPlan<N>& piece, const PointwiseOperands& ops, int width,
                   PointwiseLaunch& launch) {
  if (width <= 1 || piece.rank != 1 || piece.strides[0][0] != 1) return false;
  const auto v = static_cast<std::uintptr_t>(width);
  // Head: elements before the output's first vector boundary.
  const std::uintptr_t out_vector = ops.element_size[0] * v;
  const std::uintptr_t out_address = address_of(ops, 0, launch.offset[0]);
  std::uint32_t head = static_cast<std::uint32_t>((out_vector - out_address % out_vector) %
                                                  out_vector / ops.element_size[0]);
  head = std::min(head, launch.n);
  const std::uint32_t vectors = (launch.n - head) / static_cast<std::uint32_t>(width);
  launch.dense[0] = true;
  for (int k = 1; k < ops.count; ++k) {
    const std::size_t i = static_cast<std::size_t>(k);
    const std::int64_t stride = piece.strides[k][0];
    if (stride != 0 && stride != 1) return false;
    launch.dense[i] = ops.data[i] != nullptr && stride == 1;
    // With no whole vector there is nothing to align.
    if (launch.dense[i] && vectors > 0 &&
        address_of(ops, k, launch.offset[i] + head) % (ops.element_size[i] * v) != 0) {
      return false;  // this input's vectors would straddle their 16-byte boundaries
    }
  }
  launch.vectorised = true;
  launch.head = head;
  launch.vectors = vectors;
  return true;
}

void make_strided(const IterationPlan<N>& piece, PointwiseLaunch& launch) {
  launch.vectorised = false;
  launch.dense = {};
  StridedGeometry& g = launch.geometry;
  g = StridedGeometry{};
  g.rank = std::max(piece.rank, 1);
  for (int d = 0; d < g.rank; ++d) {
    const int src = piece.rank - 1 - d;  // the plan lists its innermost dimension last
    const bool scalar = piece.rank == 0;
    g.sizes[d] = FastDivmod(scalar ? 1u : static_cast<std::uint32_t>(piece.sizes[src]));
    for (int k = 0; k < N; ++k) {
      g.strides[d][k] = scalar ? 0u : static_cast<std::uint32_t>(piece.strides[k][src]);
    }
  }
}

}  // namespace

std::vector<PointwiseLaunch> plan_pointwise(const Shape& shape, const PointwiseOperands& ops,
                                            int vector_width) {
  EMBER_CHECK(ops.count >= 1 && ops.count <= N, "plan_pointwise: ", ops.count, " operands");
  std::array<Strides, N> strides{};
  for (int k = 0; k < N; ++k) {
    const std::size_t i = static_cast<std::size_t>(k);
    // Unused operands and immediates repeat one value: stride 0 everywhere, which never blocks
    // merging dimensions.
    strides[i] =
        (k < ops.count && ops.data[i] != nullptr) ? ops.strides[i] : Dims::filled(shape.size(), 0);
    EMBER_CHECK(strides[i].size() == shape.size(), "plan_pointwise: operand ", k, " strides ",
                strides[i], " do not match shape ", shape);
  }
  const IterationPlan<N> plan = make_iteration_plan<N>(shape, strides);
  std::vector<PointwiseLaunch> launches;
  for_each_32bit_piece(
      plan, [&](const IterationPlan<N>& piece, const std::array<std::int64_t, N>& offset) {
        PointwiseLaunch launch;
        launch.n = static_cast<std::uint32_t>(piece.numel);
        launch.offset = offset;
        if (!try_vectorise(piece, ops, vector_width, launch)) make_strided(piece, launch);
        launches.push_back(launch);
      });
  return launches;
}

std::uint64_t launch_bytes(const PointwiseLaunch& launch, const PointwiseOperands& ops) {
  std::uint64_t per_element = ops.element_size[0];
  for (int k = 1; k < ops.count; ++k) {
    const std::size_t i = static_cast<std::size_t>(k);
    const bool moves = ops.data[i] != nullptr && (!launch.vectorised || launch.dense[i]);
    if (moves) per_element += ops.element_size[i];
  }
  return per_element * launch.n;
}

}  // namespace ember
