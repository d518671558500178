// The CUDA launch planner is host code: its choices (vectorise or not, head and tail, 32-bit
// pieces) are checked here, on any machine.
#include "ember/tensor/pointwise_plan.hpp"

#include <gtest/gtest.h>

#include <set>

#include "ember/tensor/iteration.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

// Fake device addresses: only their alignment matters to the planner.
const void* at(std::uintptr_t address) {
  return reinterpret_cast<const void*>(address);
}

PointwiseOperands binary_f32(std::uintptr_t out, std::uintptr_t a, std::uintptr_t b,
                             const Shape& shape) {
  PointwiseOperands ops;
  ops.count = 3;
  ops.data = {at(out), at(a), at(b)};
  ops.strides = {contiguous_strides(shape), contiguous_strides(shape), contiguous_strides(shape)};
  ops.element_size = {4, 4, 4};
  return ops;
}

TEST(PointwisePlan, AlignedDenseOperandsVectorise) {
  for (std::int64_t n : {2, 3, 4, 7, 1023, 65537}) {
    const auto launches = plan_pointwise({n}, binary_f32(0x1000, 0x2000, 0x3000, {n}), 4);
    ASSERT_EQ(launches.size(), 1u);
    const PointwiseLaunch& l = launches[0];
    EXPECT_TRUE(l.vectorised);
    EXPECT_EQ(l.head, 0u);
    EXPECT_EQ(l.vectors, static_cast<std::uint32_t>(n / 4));
    EXPECT_EQ(l.n, static_cast<std::uint32_t>(n));
  }
}

TEST(PointwisePlan, EquallyMisalignedOperandsGetAHead) {
  // All three start 1 element past a 16-byte boundary: 3 singles, then vectors.
  const auto l = plan_pointwise({1023}, binary_f32(0x1004, 0x2004, 0x3004, {1023}), 4)[0];
  EXPECT_TRUE(l.vectorised);
  EXPECT_EQ(l.head, 3u);
  EXPECT_EQ(l.vectors, (1023u - 3u) / 4u);
  const std::uint32_t tail = l.n - l.head - 4 * l.vectors;
  EXPECT_LT(tail, 4u);
  // Fewer elements than the head: everything done singly.
  const auto small = plan_pointwise({2}, binary_f32(0x1004, 0x2004, 0x3004, {2}), 4)[0];
  EXPECT_TRUE(small.vectorised);
  EXPECT_EQ(small.head, 2u);
  EXPECT_EQ(small.vectors, 0u);
}

TEST(PointwisePlan, DifferentlyMisalignedOperandsTakeTheStridedPath) {
  const auto l = plan_pointwise({1023}, binary_f32(0x1000, 0x2004, 0x3000, {1023}), 4)[0];
  EXPECT_FALSE(l.vectorised);
  EXPECT_EQ(l.geometry.rank, 1);
  EXPECT_EQ(l.geometry.strides[0][1], 1u);
}

TEST(PointwisePlan, MixedElementSizesCheckEachOperandsOwnVector) {
  // f32 -> bf16 cast, V = 4: the output moves 8 bytes per vector, the input 16.
  PointwiseOperands ops;
  ops.count = 2;
  ops.data = {at(0x1008), at(0x2010)};  // out 4 bf16 into an 8-byte vector: aligned
  ops.strides = {Strides{100}, Strides{1}};
  ops.strides[0] = Strides{1};
  ops.element_size = {2, 4};
  auto l = plan_pointwise({100}, ops, 4)[0];
  EXPECT_TRUE(l.vectorised);
  EXPECT_EQ(l.head, 0u);
  ops.data = {at(0x1008), at(0x2018)};  // input 8 bytes off its 16-byte vector
  l = plan_pointwise({100}, ops, 4)[0];
  EXPECT_FALSE(l.vectorised);
}

TEST(PointwisePlan, BroadcastAndImmediateInputsStillVectorise) {
  PointwiseOperands ops = binary_f32(0x1000, 0x2000, 0x3000, {8, 64});
  ops.strides[2] = Strides{0, 0};  // b is one repeated value
  auto l = plan_pointwise({8, 64}, ops, 4)[0];
  EXPECT_TRUE(l.vectorised);
  EXPECT_TRUE(l.dense[1]);
  EXPECT_FALSE(l.dense[2]);
  ops.data[2] = nullptr;  // an immediate
  l = plan_pointwise({8, 64}, ops, 4)[0];
  EXPECT_TRUE(l.vectorised);
  EXPECT_FALSE(l.dense[2]);
  // A row broadcast down columns is not a single repeated value: strided.
  ops.data[2] = at(0x3000);
  ops.strides[2] = Strides{0, 1};
  l = plan_pointwise({8, 64}, ops, 4)[0];
  EXPECT_FALSE(l.vectorised);
  EXPECT_EQ(l.geometry.rank, 2);
  EXPECT_EQ(l.geometry.sizes[0].divisor, 64u);  // innermost first
  EXPECT_EQ(l.geometry.strides[0][2], 1u);
  EXPECT_EQ(l.geometry.strides[1][2], 0u);
  EXPECT_EQ(l.geometry.strides[1][0], 64u);
}

TEST(PointwisePlan, ASingleElementIsOneStridedStep) {
  const auto l = plan_pointwise({1, 1}, binary_f32(0x1000, 0x2000, 0x3000, {1, 1}), 4)[0];
  EXPECT_FALSE(l.vectorised);
  EXPECT_EQ(l.n, 1u);
  EXPECT_EQ(l.geometry.rank, 1);
  EXPECT_EQ(l.geometry.sizes[0].divisor, 1u);
}

TEST(PointwisePlan, NoVectorsWhenWidthIsOne) {
  const auto l = plan_pointwise({64}, binary_f32(0x1000, 0x2000, 0x3000, {64}), 1)[0];
  EXPECT_FALSE(l.vectorised);
}

// The bytes a launch moves decide its L2 policy: the output and each input read per element; an
// input that a vectorised launch reads as one repeated value, or an immediate, counts nothing.
TEST(PointwisePlan, LaunchBytesCountWhatEachElementMoves) {
  PointwiseOperands ops = binary_f32(0x1000, 0x2000, 0x3000, {1023});
  auto l = plan_pointwise({1023}, ops, 4)[0];
  ASSERT_TRUE(l.vectorised);
  EXPECT_EQ(launch_bytes(l, ops), 3u * 4u * 1023u);
  ops.strides[2] = Strides{0};  // b repeated: read once per thread
  l = plan_pointwise({1023}, ops, 4)[0];
  ASSERT_TRUE(l.vectorised);
  EXPECT_EQ(launch_bytes(l, ops), 2u * 4u * 1023u);
  ops.data[2] = nullptr;  // an immediate
  EXPECT_EQ(launch_bytes(plan_pointwise({1023}, ops, 4)[0], ops), 2u * 4u * 1023u);
  // The strided kernel reads a stride-0 input from memory per element; a cast counts each size.
  ops = binary_f32(0x1000, 0x2004, 0x3000, {1023});
  ops.strides[2] = Strides{0};
  l = plan_pointwise({1023}, ops, 4)[0];
  ASSERT_FALSE(l.vectorised);
  EXPECT_EQ(launch_bytes(l, ops), 3u * 4u * 1023u);
  PointwiseOperands cast;
  cast.count = 2;
  cast.data = {at(0x1000), at(0x2000)};
  cast.strides = {Strides{1}, Strides{1}};
  cast.element_size = {2, 4};
  EXPECT_EQ(launch_bytes(plan_pointwise({100}, cast, 4)[0], cast), 6u * 100u);
}

TEST(PointwisePlan, GridStepsFitThirtyTwoBits) {
  // The largest piece (2^31 - 1 elements of 1 byte, 16 per vector) with a generous grid fits.
  const std::uint64_t vectors = ((std::uint64_t{1} << 31) - 1) / 2;  // V = 2 is the smallest
  EXPECT_TRUE(grid_steps_fit_32bit(std::uint64_t{4096} * 256, vectors, 4));
  // A grid far past one wave would not.
  EXPECT_FALSE(grid_steps_fit_32bit(std::uint64_t{1} << 29, vectors, 4));
  EXPECT_FALSE(grid_steps_fit_32bit(256, (std::uint64_t{1} << 32) - 100, 4));
}

// Every element of a plan is covered exactly once by its 32-bit pieces, and each piece fits.
TEST(PointwisePlan, ThirtyTwoBitPiecesCoverEverythingOnce) {
  // A stand-in small enough to enumerate: shrink the limit by checking pieces' offsets directly.
  IterationPlan<2> plan = make_iteration_plan<2>({3, 5, 7}, {Strides{35, 7, 1}, Strides{1, 3, 15}});
  std::multiset<std::int64_t> seen;
  int pieces = 0;
  for_each_32bit_piece(plan,
                       [&](const IterationPlan<2>& piece, const std::array<std::int64_t, 2>& base) {
                         ++pieces;
                         // Enumerate the piece's output offsets.
                         std::vector<std::int64_t> index(static_cast<std::size_t>(piece.rank), 0);
                         for (std::int64_t i = 0; i < piece.numel; ++i) {
                           std::int64_t off = base[0];
                           for (int d = 0; d < piece.rank; ++d)
                             off += index[static_cast<std::size_t>(d)] * piece.strides[0][d];
                           seen.insert(off);
                           for (int d = piece.rank - 1; d >= 0; --d) {
                             if (++index[static_cast<std::size_t>(d)] < piece.sizes[d]) break;
                             index[static_cast<std::size_t>(d)] = 0;
                           }
                         }
                       });
  EXPECT_EQ(pieces, 1);  // small plans pass through whole
  EXPECT_EQ(seen.size(), 105u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 104);
}

TEST(PointwisePlan, HugeWorkIsCutIntoPiecesThatFit) {
  // 3 x 2^31 elements with a 2^33-element stride on a second operand: far past 32 bits.
  const std::int64_t big = std::int64_t{1} << 31;
  PointwiseOperands ops;
  ops.count = 2;
  ops.data = {at(0x1000), at(0x2000)};
  ops.strides = {Strides{big, 1}, Strides{std::int64_t{1} << 33, 1}};
  ops.element_size = {1, 1};
  const auto launches = plan_pointwise({3, big}, ops, 16);
  std::int64_t total = 0;
  std::set<std::int64_t> starts;
  for (const PointwiseLaunch& l : launches) {
    EXPECT_LE(l.n, static_cast<std::uint32_t>(kMaxIndex32));
    total += l.n;
    starts.insert(l.offset[0]);
    // The input's base moves with the output's: row r starts at r * 2^33.
    EXPECT_EQ(l.offset[1], (l.offset[0] / big) * (std::int64_t{1} << 33) + l.offset[0] % big);
  }
  EXPECT_EQ(total, 3 * big);
  EXPECT_EQ(starts.size(), launches.size());  // no piece twice
  EXPECT_GT(launches.size(), 3u);
}

// The strided kernel's index math (offsets_of, the same code the kernel runs) against offsets
// computed from the original, uncoalesced strides, for random shapes and permuted or sliced
// operands: checks coalescing, the innermost-first geometry and FastDivmod together.
TEST(PointwisePlan, StridedIndexMathMatchesTheTensorsStrides) {
  auto rng = testing::make_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 6);
    Shape shape;
    for (int d = 0; d < rank; ++d)
      shape.push_back(1 + static_cast<std::int64_t>(rng() % 9));
    // Input 1: a permutation of a dense block; input 2: every other element along a dimension;
    // input 3: broadcast along a random dimension.
    Dims order;
    for (int d = 0; d < rank; ++d)
      order.push_back(d);
    for (int d = rank - 1; d > 0; --d)
      std::swap(order[d], order[static_cast<int>(rng() % (d + 1))]);
    Shape base_shape;
    for (int d = 0; d < rank; ++d)
      base_shape.push_back(shape[static_cast<int>(order[d])]);
    const Strides base = contiguous_strides(base_shape);
    Strides permuted = Dims::filled(rank, 0);
    for (int d = 0; d < rank; ++d)
      permuted[static_cast<int>(order[d])] = base[d];
    Strides stepped = contiguous_strides(shape);
    const int step_dim = static_cast<int>(rng() % rank);
    for (int d = 0; d <= step_dim; ++d)
      stepped[d] *= 2;
    Strides broadcast = contiguous_strides(shape);
    broadcast[static_cast<int>(rng() % rank)] = 0;
    PointwiseOperands ops;
    ops.count = 4;
    ops.data = {at(0x1000), at(0x2000), at(0x3000), at(0x4000)};
    ops.strides = {contiguous_strides(shape), permuted, stepped, broadcast};
    ops.element_size = {4, 4, 4, 4};
    const auto launches = plan_pointwise(shape, ops, 1);
    ASSERT_EQ(launches.size(), 1u);
    const PointwiseLaunch& l = launches[0];
    ASSERT_FALSE(l.vectorised);
    ASSERT_EQ(l.n, static_cast<std::uint32_t>(shape.numel()));
    std::vector<std::int64_t> index(static_cast<std::size_t>(rank), 0);
    for (std::uint32_t i = 0; i < l.n; ++i) {
      std::uint32_t offset[4];
      offsets_of<4>(l.geometry, i, offset);
      for (int k = 0; k < 4; ++k) {
        std::int64_t expected = 0;
        for (int d = 0; d < rank; ++d) {
          expected +=
              index[static_cast<std::size_t>(d)] * ops.strides[static_cast<std::size_t>(k)][d];
        }
        ASSERT_EQ(offset[k], expected) << "operand " << k << " index " << i << " shape " << shape;
      }
      for (int d = rank - 1; d >= 0; --d) {
        if (++index[static_cast<std::size_t>(d)] < shape[d]) break;
        index[static_cast<std::size_t>(d)] = 0;
      }
    }
  }
}

}  // namespace
}  // namespace ember
