// Whether the CPU GEMM (ops::gemm, OpenBLAS on the host) gives a row of a product the same bits
// whatever the number of rows in the call, and the comparison that tests of differently split
// batches make with it.
//
// Not every BLAS does. OpenBLAS 0.3.21 on AMD EPYC (Zen 3) picks its kernels by the product's
// size: rows 0..m of a 96-row product differ in their last bits from the same rows multiplied 1, 7,
// 32 or 64 at a time (K 13 to 1024, N 64 to 1024). There, a batch split over 1, 2 or 3 processes
// or ranks gives each sample's forward in another order of additions, so its prediction and loss
// match one process's only to rounding. Where the rows do not depend on the row count (the
// machines these tests were first run on), the runs agree bit for bit and the tests say so.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ember/tensor/gemm.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::testing {

inline bool cpu_gemm_rows_independent_of_row_count() {
  static const bool independent = [] {
    constexpr std::int64_t kRows = 96;
    for (const auto& [k, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {16, 512}, {128, 256}, {479, 1024}, {1024, 64}}) {
      std::vector<float> a(static_cast<std::size_t>(kRows * k)), b(static_cast<std::size_t>(k * n));
      std::uint32_t state = 12345;
      const auto next = [&] {
        state = state * 1664525u + 1013904223u;
        return static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
      };
      for (auto& v : a)
        v = next();
      for (auto& v : b)
        v = next();
      const Tensor ta = Tensor::from_vector(a, {kRows, k});
      const Tensor tb = Tensor::from_vector(b, {k, n});
      const Tensor whole = Tensor::zeros({kRows, n});
      ops::gemm(ta, tb, whole);
      const std::vector<float> want = whole.to_vector<float>();
      for (std::int64_t m : {1, 7, 32, 64}) {
        const Tensor part = Tensor::zeros({m, n});
        ops::gemm(ta.slice(0, 0, m).contiguous(), tb, part);
        const std::vector<float> got = part.to_vector<float>();
        if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0) return false;
      }
    }
    return true;
  }();
  return independent;
}

// got == want bit for bit where the CPU GEMM's rows do not depend on the row count; elsewhere
// within `rel` of want (relative) plus `abs`, saying why.
inline void expect_same_or_close(double got, double want, double rel, double abs,
                                 const std::string& what) {
  if (cpu_gemm_rows_independent_of_row_count()) {
    EXPECT_EQ(got, want) << what;
  } else {
    EXPECT_NEAR(got, want, rel * std::fabs(want) + abs)
        << what << " (this CPU's GEMM rounds a row differently by the rows in the call)";
  }
}

}  // namespace ember::testing
