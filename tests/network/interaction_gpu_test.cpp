// The dot interaction on CUDA against the CPU layer, for each of its kernels (16-bit tensor cores,
// TF32 tensor cores, exact f32 CUDA cores, generic; launchers.hpp: interaction_kernel) in f32, tf32
// (f32 activations, the network's allow_tf32 on), f16 and bf16: F1 = 1, 2, 7, 16, 17, 27, 32 (fast
// kernels; 16 and 17 on either side of the tensor cores' one and two row tiles) and 33 (generic)
// rows, widths 4 (CUDA cores in tf32), 8 and 136 (multiples of 8, not of 16: CUDA cores in 16 bits,
// TF32 tensor cores with a padded last column tile), 16, 128 and 256, batches 1, 7 and 1023, and
// batches larger than the resident warps (the grid-stride loop): 8191 at DLRM's shape, at width 136
// and at width 8, 65537 at width 16. Fresh random inputs each run.
//
// Tolerance, per element. Both sides read the same 16-bit (or f32) inputs, whose products are
// exact in f32, and accumulate in f32 in different orders; each side then rounds its f32 sum to
// the output dtype once. For a sum of n terms with magnitudes summing to S, the accumulations
// differ by at most n 2^-21 S (n 2^-24 S a side for round-to-nearest; the device's share is
// doubled, since tensor cores need not round to nearest inside an accumulation), and the two
// final roundings by at most 2u of the value (u: 2^-11 f16, 2^-8 bf16, 2^-24 f32), plus f16's
// subnormal step. S is bounded by Cauchy-Schwarz from the rows' norms (forward: the two rows;
// backward: G's row and X's column). A wrong pair, row or tile gives errors of order S.
//
// TF32 tensor cores round both factors of each product to TF32 (10-bit mantissa, round to
// nearest: relative error at most u_in = 2^-11 each), so each product is off by at most
// (2 u_in + u_in^2) of its magnitude: the bound adds (2 u_in + u_in^2) S to the above (u_in = 0
// for every other kernel; their inputs reach the products unrounded), still far below a wrong
// tile's S.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ember/network/kernels/launchers.hpp"
#include "layer_test_support.hpp"
#include "support/test_support.hpp"

namespace ember::network::testing {
namespace {

// The activations' dtype and whether the network allows TF32 (BuildOptions::allow_tf32).
struct Mode {
  const char* name;
  DType dtype;
  bool tf32;
};
constexpr Mode kModes[] = {{"f32", DType::F32, false},
                           {"tf32", DType::F32, true},
                           {"f16", DType::F16, false},
                           {"bf16", DType::BF16, false}};

// Whether a shape takes the TF32 tensor cores (aligned pointers, sm_80+): the rule the dispatch
// test checks against interaction_kernel().
bool takes_tf32(const Mode& mode, std::int64_t f1, std::int64_t width) {
  return mode.dtype == DType::F32 && mode.tf32 && f1 <= 32 && width % 8 == 0;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::F16:
      return std::ldexp(1.0, -11);
    case DType::BF16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -24);
  }
}

std::vector<double> random_rounded(std::size_t n, DType dtype, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& x : v)
    x = u(rng);
  return rounded(std::move(v), dtype);
}

// Element-wise |gpu - cpu| <= 2u |cpu| + (n 2^-21 + 2 u_in + u_in^2) scale + f16's subnormal
// step (u_in: the inputs' rounding inside the products, 2^-11 on TF32 tensor cores, else 0), and
// the norm of the difference within 3 max(u, u_in) of the larger of the reference's norm and the
// scales' norm. Reports the first failing element and how many failed.
void expect_within(const std::vector<double>& gpu, const std::vector<double>& cpu,
                   const std::vector<double>& scale, double terms, DType dtype, double u_in,
                   const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  const double u = unit_roundoff(dtype);
  const double acc = terms * std::ldexp(1.0, -21) + 2 * u_in + u_in * u_in;
  const double floor = dtype == DType::F16 ? std::ldexp(1.0, -23) : 0.0;
  std::size_t bad = 0, first = 0;
  double worst_excess = 0, scale_sq = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double bound = 2 * u * std::abs(cpu[i]) + acc * scale[i] + floor;
    const double err = std::abs(gpu[i] - cpu[i]);
    scale_sq += scale[i] * scale[i];
    if (!(err <= bound)) {  // NaN fails too
      if (bad++ == 0) first = i;
      worst_excess = std::max(worst_excess, err / std::max(bound, 1e-300));
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << cpu.size()
                     << " values out of bounds, first at " << first << ": device " << gpu[first]
                     << ", CPU " << cpu[first] << " (scale " << scale[first] << "), worst "
                     << worst_excess << "x its bound";
  const double norm_scale = std::sqrt(scale_sq);
  EXPECT_LE(relative_error(gpu, cpu, std::max(norm_scale, 1e-12)), 3 * std::max(u, u_in) + 2e-5)
      << what;
}

struct Case {
  std::int64_t batch, f1, width;
  bool mlp_grad = true, emb_grad = true;
};

std::string describe(const Case& c, const Mode& mode) {
  return cat("Interaction batch ", c.batch, " F1 ", c.f1, " width ", c.width, " ", mode.name,
             c.mlp_grad ? "" : " (no MLP gradient)", c.emb_grad ? "" : " (no embedding gradient)");
}

void build(Graph& g, const Case& c) {
  g.input("mlp", {c.batch, c.width}, c.mlp_grad);
  g.input("emb", {c.batch, c.f1 - 1, c.width}, c.emb_grad);
  g.add(R"({"name": "i", "type": "Interaction", "bottom": ["mlp", "emb"], "top": "y"})");
  g.finalize();
}

// Forward scales: per output value the bound on the sum of its terms' magnitudes (0 for the
// copied MLP vector and the padding, which must match exactly).
std::vector<double> forward_scale(const Case& c, const std::vector<double>& mlp,
                                  const std::vector<double>& emb) {
  const std::int64_t w = c.width, f1 = c.f1, ow = w + f1 * (f1 - 1) / 2 + 1;
  std::vector<double> scale(static_cast<std::size_t>(c.batch * ow), 0.0);
  std::vector<double> norm(static_cast<std::size_t>(f1));
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t r = 0; r < f1; ++r) {
      const double* x = r == 0 ? &mlp[static_cast<std::size_t>(b * w)]
                               : &emb[static_cast<std::size_t>((b * (f1 - 1) + r - 1) * w)];
      double sq = 0;
      for (std::int64_t k = 0; k < w; ++k)
        sq += x[k] * x[k];
      norm[static_cast<std::size_t>(r)] = std::sqrt(sq);
    }
    for (std::int64_t i = 1; i < f1; ++i) {
      for (std::int64_t j = 0; j < i; ++j) {
        scale[static_cast<std::size_t>(b * ow + w + i * (i - 1) / 2 + j)] =
            norm[static_cast<std::size_t>(i)] * norm[static_cast<std::size_t>(j)];
      }
    }
  }
  return scale;
}

// Backward scales for dmlp ([batch, w]) and demb ([batch, F1 - 1, w]): ||G_r|| ||X_:c||, plus
// the direct gradient's magnitude on the MLP row.
void backward_scales(const Case& c, const std::vector<double>& mlp, const std::vector<double>& emb,
                     const std::vector<double>& dy, std::vector<double>* dmlp_scale,
                     std::vector<double>* demb_scale) {
  const std::int64_t w = c.width, f1 = c.f1, ow = w + f1 * (f1 - 1) / 2 + 1;
  dmlp_scale->assign(static_cast<std::size_t>(c.batch * w), 0.0);
  demb_scale->assign(static_cast<std::size_t>(c.batch * (f1 - 1) * w), 0.0);
  std::vector<double> g_norm(static_cast<std::size_t>(f1)), col_norm(static_cast<std::size_t>(w));
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const double* g = &dy[static_cast<std::size_t>(b * ow + w)];
    for (std::int64_t r = 0; r < f1; ++r) {
      double sq = 0;
      for (std::int64_t j = 0; j < f1; ++j) {
        if (j == r) continue;
        const std::int64_t hi = std::max(r, j), lo = std::min(r, j);
        sq += g[hi * (hi - 1) / 2 + lo] * g[hi * (hi - 1) / 2 + lo];
      }
      g_norm[static_cast<std::size_t>(r)] = std::sqrt(sq);
    }
    for (std::int64_t k = 0; k < w; ++k) {
      double sq = 0;
      for (std::int64_t r = 0; r < f1; ++r) {
        const double x = r == 0 ? mlp[static_cast<std::size_t>(b * w + k)]
                                : emb[static_cast<std::size_t>((b * (f1 - 1) + r - 1) * w + k)];
        sq += x * x;
      }
      col_norm[static_cast<std::size_t>(k)] = std::sqrt(sq);
    }
    for (std::int64_t k = 0; k < w; ++k) {
      (*dmlp_scale)[static_cast<std::size_t>(b * w + k)] =
          g_norm[0] * col_norm[static_cast<std::size_t>(k)] +
          std::abs(dy[static_cast<std::size_t>(b * ow + k)]);
      for (std::int64_t r = 1; r < f1; ++r) {
        (*demb_scale)[static_cast<std::size_t>((b * (f1 - 1) + r - 1) * w + k)] =
            g_norm[static_cast<std::size_t>(r)] * col_norm[static_cast<std::size_t>(k)];
      }
    }
  }
}

void compare_with_cpu(const Case& c, const Mode& mode, std::mt19937_64& rng) {
  const std::string what = describe(c, mode);
  const DType dtype = mode.dtype;
  const double u_in = takes_tf32(mode, c.f1, c.width) ? std::ldexp(1.0, -11) : 0.0;
  BuildOptions options;
  options.allow_tf32 = mode.tf32;
  Graph gpu(Place::cuda(0), dtype, options);
  build(gpu, c);
  Graph cpu(Place::host(), DType::F32);
  build(cpu, c);
  cpu.emulate_storage_of(gpu);
  const auto mlp = random_rounded(static_cast<std::size_t>(c.batch * c.width), dtype, rng);
  const auto emb =
      random_rounded(static_cast<std::size_t>(c.batch * (c.f1 - 1) * c.width), dtype, rng);
  for (Graph* g : {&gpu, &cpu}) {
    g->set_values("mlp", mlp);
    g->set_values("emb", emb);
    g->forward(true);
  }
  const auto y = cpu.values("y");
  const auto y_gpu = gpu.values("y");
  expect_within(y_gpu, y, forward_scale(c, mlp, emb), static_cast<double>(c.width), dtype, u_in,
                what + " forward");
  const std::int64_t ow = c.width + c.f1 * (c.f1 - 1) / 2 + 1;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    ASSERT_EQ(y_gpu[static_cast<std::size_t>(b * ow + ow - 1)], 0.0) << what << " padding " << b;
  }
  if (!c.mlp_grad && !c.emb_grad) return;
  const auto dy = random_rounded(y.size(), dtype, rng);
  gpu.set_grad("y", dy);
  cpu.set_grad("y", dy);
  gpu.backward();
  cpu.backward();
  std::vector<double> dmlp_scale, demb_scale;
  backward_scales(c, mlp, emb, dy, &dmlp_scale, &demb_scale);
  const double terms = static_cast<double>(c.f1);  // F1 - 1 products and the direct gradient
  if (c.mlp_grad) {
    expect_within(gpu.grad("mlp"), cpu.grad("mlp"), dmlp_scale, terms, dtype, u_in,
                  what + " gradient of mlp");
  }
  if (c.emb_grad && c.f1 > 1) {
    expect_within(gpu.grad("emb"), cpu.grad("emb"), demb_scale, terms, dtype, u_in,
                  what + " gradient of emb");
  }
}

#if EMBER_WITH_CUDA
cuda::InteractionKernel expected_kernel(const Mode& mode, std::int64_t f1, std::int64_t width) {
  if (f1 > 32 || width % 4 != 0) return cuda::InteractionKernel::Generic;
  if (mode.dtype != DType::F32 && width % 16 == 0) return cuda::InteractionKernel::TensorCores;
  if (takes_tf32(mode, f1, width)) return cuda::InteractionKernel::Tf32TensorCores;
  return cuda::InteractionKernel::CudaCores;
}
#endif

// Which kernels each shape takes: DLRM's (26 embeddings of width 128) the fast ones in every
// dtype, tensor cores in 16 bits, and in f32 the exact CUDA cores unless TF32 is allowed, the
// TF32 tensor cores when it is (16 bits ignore the flag); the rest as documented in
// launchers.hpp.
TEST(InteractionOnCuda, DispatchPicksTheFastKernelsForDlrm) {
  EMBER_REQUIRE_GPU();
#if EMBER_WITH_CUDA
  using cuda::InteractionKernel;
  for (bool backward : {false, true}) {
    for (bool tf32 : {false, true}) {
      EXPECT_EQ(cuda::interaction_kernel(DType::F16, 26, 128, backward, tf32),
                InteractionKernel::TensorCores);
      EXPECT_EQ(cuda::interaction_kernel(DType::BF16, 26, 128, backward, tf32),
                InteractionKernel::TensorCores);
    }
    EXPECT_EQ(cuda::interaction_kernel(DType::F32, 26, 128, backward, false),
              InteractionKernel::CudaCores);
    EXPECT_EQ(cuda::interaction_kernel(DType::F32, 26, 128, backward, true),
              InteractionKernel::Tf32TensorCores);
    for (const Mode& mode : kModes) {
      for (std::int64_t f1 : {1, 2, 7, 27, 32, 33}) {
        for (std::int64_t width : {4, 8, 16, 128, 136, 256, 6}) {
          const InteractionKernel got =
              cuda::interaction_kernel(mode.dtype, f1 - 1, width, backward, mode.tf32);
          EXPECT_EQ(got, expected_kernel(mode, f1, width))
              << mode.name << " F1 " << f1 << " width " << width
              << (backward ? " backward" : " forward") << ": got "
              << cuda::interaction_kernel_name(got);
        }
      }
    }
  }
#endif
}

TEST(InteractionOnCuda, EveryKernelMatchesTheCpuAcrossShapes) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (const Mode& mode : kModes) {
    for (std::int64_t f1 : {1, 2, 7, 16, 17, 27, 32, 33}) {
      for (std::int64_t width : {4, 8, 16, 128, 136, 256}) {
        for (std::int64_t batch : {1, 7, 1023}) {
          compare_with_cpu({batch, f1, width}, mode, rng);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

// More samples than warps resident at once: every warp loops over several samples, reusing its
// shared memory (the zero padding, G's zero diagonal, the pair table stay valid; in the TF32
// forward the padding rows its staged products overwrite are zeroed again: width 8).
TEST(InteractionOnCuda, LargeBatchesMatchTheCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (const Mode& mode : kModes) {
    compare_with_cpu({8191, 27, 128}, mode, rng);  // DLRM's shape
    compare_with_cpu({8191, 7, 136}, mode, rng);
    compare_with_cpu({8191, 7, 8}, mode, rng);
    compare_with_cpu({8191, 27, 8}, mode, rng);
    compare_with_cpu({65537, 27, 16}, mode, rng);
  }
}

// Only one of the two gradients wanted (the other bottom needs none).
TEST(InteractionOnCuda, OneGradientAloneMatchesTheCpu) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  for (const Mode& mode : kModes) {
    for (std::int64_t width : {128, 136}) {
      compare_with_cpu({1023, 27, width, true, false}, mode, rng);
      compare_with_cpu({1023, 27, width, false, true}, mode, rng);
    }
  }
}

}  // namespace
}  // namespace ember::network::testing
