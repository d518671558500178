#include "column_pieces_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/core/half.hpp"
#include "ember/core/stream.hpp"
#include "ember/network/layers/copy_util.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::network::testing {

namespace {

struct Case {
  std::string name;
  std::int64_t cols;
  std::vector<std::pair<std::int64_t, std::int64_t>> pieces;  // (begin, width)
};

std::vector<Case> cases() {
  std::vector<Case> c = {
      {"deepfm 11 -> 10 + 1", 11, {{0, 10}, {10, 1}}},
      {"two whole-width tops", 390, {{0, 390}, {0, 390}}},
      {"concat 260 + 130", 390, {{0, 260}, {260, 130}}},
      {"overlap, columns left out", 8, {{1, 3}, {2, 4}}},
      {"no piece", 5, {}},
      {"one column", 1, {{0, 1}}},
      {"three pieces, one reused", 13, {{0, 5}, {5, 8}, {3, 4}}},
  };
  Case ones{"13 one-wide pieces (two launches)", 13, {}};
  for (std::int64_t k = 0; k < 13; ++k)
    ones.pieces.push_back({12 - k, 1});
  c.push_back(ones);
  Case wide{"11 overlapping pieces (two launches)", 16, {}};
  for (std::int64_t k = 0; k < 11; ++k)
    wide.pieces.push_back({k % 5, 16 - k % 5 - 3});
  c.push_back(wide);
  return c;
}

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void check_case(bool cuda, const Case& k, std::int64_t rows, std::int64_t offset,
                std::mt19937_64& rng) {
  const Place place = cuda ? Place::cuda(0) : Place::host();
  const std::int64_t cols = k.cols;
  std::uniform_real_distribution<float> u(-4, 4);
  auto random_values = [&](std::int64_t n) {
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& x : v)
      x = T(u(rng));
    return v;
  };
  std::vector<std::vector<T>> piece_values;
  std::vector<Tensor> piece_tensors;
  for (const auto& [begin, width] : k.pieces) {
    piece_values.push_back(random_values(rows * width));
    piece_tensors.push_back(Tensor::from_vector(piece_values.back(), place));
  }
  auto pieces_of = [&]() {
    std::vector<detail::ColumnPiece> p;
    for (std::size_t i = 0; i < k.pieces.size(); ++i)
      p.push_back({piece_tensors[i].data(), k.pieces[i].first, k.pieces[i].second});
    return p;
  };
  auto sync = [&] {
    if (cuda) synchronize_device(0);
  };
  const StreamHandle stream = cuda ? current_stream(0) : StreamHandle{};
  const DType dtype = dtype_of<T>();
  const std::string what = k.name + ", " + std::to_string(rows) + " rows, offset " +
                           std::to_string(offset) + ", " + std::string(dtype_name(dtype));

  // Join, writing and accumulating; the matrix starts `offset` elements into its buffer.
  for (bool accumulate : {false, true}) {
    const std::vector<T> before = random_values(offset + rows * cols);
    std::vector<T> want = before;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        // CUDA takes the pieces kMaxColumnPieces a launch, each launch adding its sum to what
        // the one before wrote; the CPU takes them all at once.
        const std::size_t n = k.pieces.size();
        const std::size_t run = cuda ? static_cast<std::size_t>(cuda::kMaxColumnPieces) : n;
        T& d = want[static_cast<std::size_t>(offset + r * cols + c)];
        bool add = accumulate;
        for (std::size_t start = 0; start == 0 || start < n; start += run) {
          Acc<T> sum = 0;
          for (std::size_t i = start; i < n && i < start + run; ++i) {
            const auto [begin, width] = k.pieces[i];
            if (c >= begin && c < begin + width) {
              sum += static_cast<Acc<T>>(
                  piece_values[i][static_cast<std::size_t>(r * width + c - begin)]);
            }
          }
          d = T(add ? static_cast<Acc<T>>(d) + sum : sum);
          add = true;
          if (run == 0) break;
        }
      }
    }
    const Tensor dst = Tensor::from_vector(before, place);
    detail::join_columns(cuda, dtype, rows, cols, pieces_of(), static_cast<T*>(dst.data()) + offset,
                         accumulate, stream);
    sync();
    const std::vector<T> got = dst.to_vector<T>();
    std::int64_t wrong = 0, first = -1;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (!same_bits(got[i], want[i])) {
        if (first < 0) first = static_cast<std::int64_t>(i);
        ++wrong;
      }
    }
    EXPECT_EQ(wrong, 0) << "join " << (accumulate ? "accumulating " : "") << what
                        << ": first wrong element " << first;
  }

  // Split: each piece gets its columns, bit for bit.
  if (k.pieces.empty()) return;
  const std::vector<T> src = random_values(offset + rows * cols);
  const Tensor src_tensor = Tensor::from_vector(src, place);
  for (auto& t : piece_tensors)
    t = Tensor::from_vector(random_values(t.numel()), place);
  detail::split_columns(cuda, dtype, rows, cols, static_cast<const T*>(src_tensor.data()) + offset,
                        pieces_of(), stream);
  sync();
  // A later piece over the same columns writes the same values, so every piece holds its own.
  for (std::size_t i = 0; i < k.pieces.size(); ++i) {
    const auto [begin, width] = k.pieces[i];
    const std::vector<T> got = piece_tensors[i].to_vector<T>();
    std::int64_t wrong = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < width; ++c) {
        wrong += !same_bits(got[static_cast<std::size_t>(r * width + c)],
                            src[static_cast<std::size_t>(offset + r * cols + begin + c)]);
      }
    }
    EXPECT_EQ(wrong, 0) << "split " << what << ", piece " << i;
  }
}

template <class T>
void check_all(bool cuda, std::mt19937_64& rng) {
  for (const Case& k : cases()) {
    for (std::int64_t rows : {1, 7, 1023}) {
      for (std::int64_t offset : {0, 1})
        check_case<T>(cuda, k, rows, offset, rng);
    }
  }
  // Past one pass of the grid (the grid-stride loop), at DeepFM's and a concatenation's widths.
  const auto all = cases();
  check_case<T>(cuda, all[0], 100003, 0, rng);
  check_case<T>(cuda, all[2], 65537, 0, rng);
}

}  // namespace

void check_column_pieces(bool cuda, DType dtype, std::mt19937_64& rng) {
  switch (dtype) {
    case DType::F32:
      check_all<float>(cuda, rng);
      return;
    case DType::F64:
      check_all<double>(cuda, rng);
      return;
    case DType::F16:
      check_all<Half>(cuda, rng);
      return;
    case DType::BF16:
      check_all<BFloat16>(cuda, rng);
      return;
    default:
      EMBER_THROW("check_column_pieces: no case for ", dtype_name(dtype));
  }
}

}  // namespace ember::network::testing
