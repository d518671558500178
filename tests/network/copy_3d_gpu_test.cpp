// copy_3d on CUDA (cuda::copy_3d: the block copy under Concat, Slice, FusedReshapeConcat and the
// other layout layers) against a host copy of the same layout, element for element: every path it
// takes (one contiguous copy, 16-byte accesses, per-element accesses with 1 to 32 lanes a row,
// a thread per element for rows of up to 16 elements, accumulation) in f32, f16 and bf16, with
// widths of 1 to 1024 columns, odd strides and offsets that leave rows unaligned, and batches of 1,
// 7, 1023 and 65537. A copy moves bits; an accumulation adds in f32 and rounds once, which the host
// does the same way.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/half.hpp"
#include "ember/core/stream.hpp"
#include "ember/network/layers/copy_util.hpp"
#include "ember/tensor/tensor.hpp"
#include "support/test_support.hpp"

namespace ember::network {
namespace {

// One layout: dst[b * dst_bs + r * dst_rs + c] (=|+=) src[b * src_bs + r * src_rs + c], the
// buffers starting at element offsets src_at and dst_at.
struct Layout {
  std::int64_t batch, rows, cols;
  std::int64_t src_bs, src_rs, dst_bs, dst_rs;
  std::int64_t src_at = 0, dst_at = 0;
  std::int64_t src_size() const {
    return src_at + (batch - 1) * src_bs + (rows - 1) * src_rs + cols;
  }
  std::int64_t dst_size() const {
    return dst_at + (batch - 1) * dst_bs + (rows - 1) * dst_rs + cols;
  }
};

std::string describe(const Layout& l, bool accumulate, DType t) {
  return cat(l.batch, "x", l.rows, "x", l.cols, " src (", l.src_bs, ", ", l.src_rs, ") at ",
             l.src_at, " dst (", l.dst_bs, ", ", l.dst_rs, ") at ", l.dst_at,
             accumulate ? " accumulate " : " ", dtype_name(t));
}

template <class T>
void check_layout(const Layout& l, bool accumulate, std::mt19937_64& rng) {
  const DType dtype = dtype_of<T>();
  std::uniform_real_distribution<float> u(-4, 4);
  std::vector<T> src(static_cast<std::size_t>(l.src_size())),
      dst(static_cast<std::size_t>(l.dst_size()));
  for (auto& v : src)
    v = T(u(rng));
  for (auto& v : dst)
    v = T(u(rng));
  std::vector<T> want = dst;
  for (std::int64_t b = 0; b < l.batch; ++b) {
    for (std::int64_t r = 0; r < l.rows; ++r) {
      for (std::int64_t c = 0; c < l.cols; ++c) {
        const T s = src[static_cast<std::size_t>(l.src_at + b * l.src_bs + r * l.src_rs + c)];
        T& d = want[static_cast<std::size_t>(l.dst_at + b * l.dst_bs + r * l.dst_rs + c)];
        d = accumulate ? T(static_cast<float>(d) + static_cast<float>(s)) : s;
      }
    }
  }
  const Tensor src_dev = Tensor::from_vector(src, Place::cuda(0));
  const Tensor dst_dev = Tensor::from_vector(dst, Place::cuda(0));
  detail::copy_3d(true, dtype, l.batch, l.rows, l.cols, src_dev.data<T>() + l.src_at, l.src_bs,
                  l.src_rs, dst_dev.data<T>() + l.dst_at, l.dst_bs, l.dst_rs, accumulate,
                  current_stream(0));
  synchronize_device(0);
  const std::vector<T> got = dst_dev.to_vector<T>();
  std::int64_t wrong = 0, first = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << describe(l, accumulate, dtype) << ": first wrong element " << first
                      << " of " << got.size();
}

template <class T>
void check_every_layout(std::mt19937_64& rng) {
  for (std::int64_t batch : {1, 7, 1023}) {
    for (std::int64_t cols : {1, 7, 8, 13, 16, 24, 429, 1024}) {
      for (bool accumulate : {false, true}) {
        // Contiguous: one copy (or, accumulating, one long row per batch).
        check_layout<T>({batch, 1, cols, cols, cols, cols, cols}, accumulate, rng);
        // Concat: a narrow block into a wider row, at an offset (unaligned for odd widths).
        check_layout<T>({batch, 1, cols, cols, 0, cols + 5, 0, 0, 3}, accumulate, rng);
        // Concat at an aligned offset into a row that keeps 16-byte alignment.
        check_layout<T>({batch, 1, cols, cols, 0, cols + 8, 0, 0, 8}, accumulate, rng);
        // Slice: out of a wider row.
        check_layout<T>({batch, 1, cols, cols + 13, 0, cols, 0, 13, 0}, accumulate, rng);
        // Rows inside a batch entry (FusedReshapeConcat), both strides padded.
        check_layout<T>({batch, 3, cols, 3 * cols + 11, cols + 2, 3 * (cols + 1), cols + 1},
                        accumulate, rng);
        // Rows that follow each other in both layouts (merged into one longer row).
        check_layout<T>({batch, 3, cols, 3 * cols + 8, cols, 3 * cols + 16, cols, 0, 8}, accumulate,
                        rng);
      }
    }
  }
  // One long row, cut into pieces over the grid (unaligned, so not one plain copy).
  for (bool accumulate : {false, true})
    check_layout<T>({1, 1, 100003, 0, 0, 0, 0, 1, 3}, accumulate, rng);
  // DeepFM's Slice of 11-wide rows into 10 and 1, over more elements than the narrow kernel's
  // grid covers in one unrolled pass (its grid-stride loop), and its backward's accumulation.
  for (std::int64_t at : {0, 10}) {
    const std::int64_t cols = at == 0 ? 10 : 1;
    check_layout<T>({1000003, 1, cols, 11, 0, cols, 0, at, 0}, false, rng);
    check_layout<T>({1000003, 1, cols, cols, 0, 11, 0, 0, at}, true, rng);
  }
  // More rows than the grid's threads: the grid-stride loop.
  for (std::int64_t cols : {7, 429}) {
    check_layout<T>({65537, 1, cols, cols, 0, cols + 3, 0, 0, 1}, false, rng);
    check_layout<T>({65537, 1, cols, cols + 1, 0, cols, 0, 1, 0}, true, rng);
  }
}

TEST(Copy3dOnCuda, MatchesTheHostCopyF32) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_every_layout<float>(rng);
}

TEST(Copy3dOnCuda, MatchesTheHostCopyF16) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_every_layout<Half>(rng);
}

TEST(Copy3dOnCuda, MatchesTheHostCopyBf16) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  check_every_layout<BFloat16>(rng);
}

}  // namespace
}  // namespace ember::network
