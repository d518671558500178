// A planned cuBLASLt matrix product with an epilogue, for the fully connected layers.
//
// Problems are described column-major, as cuBLASLt sees them: D[m, n] = op(A)[m, k] op(B)[k, n]
// with leading dimensions lda/ldb/ldd; row-major callers swap operands (see
// fully_connected_layer.cpp). plan() asks cuBLASLt's heuristics once for the given pointers (their
// alignment matters) and remembers the algorithm; supported() is false when cuBLASLt has no
// algorithm for the epilogue, so callers fall back to a plain product plus their own kernels.
//
// Each device has one cuBLASLt handle and one 32 MiB workspace, shared by all plans on it: like
// a cuBLAS handle, drive a device's dense layers from one stream at a time.
#pragma once

#include <cstdint>
#include <memory>

#include "ember/core/device.hpp"
#include "ember/core/dtype.hpp"

namespace ember::nn::cuda {

enum class Epilogue : std::uint8_t {
  None,         // D = A B
  Bias,         // D = A B + bias (bias: m values, D's dtype)
  ReluBias,     // D = relu(A B + bias)
  ReluAuxBias,  // as ReluBias, also writes the ReLU bit mask of D to aux
  BiasGradA,    // D = A B; bias = sum of A over the k dimension (m values, D's dtype)
  Drelu,        // D = (A B) * relu'(from the aux bit mask)
};

const char* epilogue_name(Epilogue e);

struct MatmulProblem {
  bool transpose_a = false, transpose_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldd = 0;
  DType ab_dtype = DType::F32;  // A and B
  DType d_dtype = DType::F32;   // D (and C)
  bool allow_tf32 = false;      // f32 inputs only
  Epilogue epilogue = Epilogue::None;
  std::int64_t aux_ld = 0;      // ReLU mask leading dimension in bits (multiple of 128, >= m)
};

// Bits of a ReLU mask row for a D with `rows` rows: cuBLASLt wants a multiple of 128.
inline std::int64_t relu_mask_ld(std::int64_t rows) { return (rows + 127) / 128 * 128; }

class LtMatmul {
 public:
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // Plans `problem` on `device` for these pointers (null where the epilogue needs none).
  // Throws only on real CUDA/cuBLAS errors; an unsupported combination gives supported() false.
  static std::unique_ptr<LtMatmul> plan(const MatmulProblem& problem, int device, const void* a,
                                        const void* b, const void* d, const void* bias,
                                        const void* aux);

  bool supported() const { return supported_; }
  const MatmulProblem& problem() const { return problem_; }

  // D = alpha op(A) op(B) + beta D with the planned epilogue. `bias` is the bias (Bias*) or the
  // bias-gradient output (BiasGradA); `aux` the ReLU mask (written by ReluAuxBias, read by
  // Drelu). Throws if !supported().
  void run(const void* a, const void* b, void* d, const void* bias, void* aux, float alpha,
           float beta, StreamHandle stream) const;

 private:
  LtMatmul() = default;
  struct Impl;
  MatmulProblem problem_;
  bool supported_ = false;
  int device_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::nn::cuda
