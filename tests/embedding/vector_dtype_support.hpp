// Test helpers for an embedding whose batch vectors are 16-bit (mixed precision): the layer's
// forward written into an f32 / f16 / bf16 output (forward_into) and its backward fed a
// gradient of any of those types, on one rank at any place; one-hot batches; bitwise checks.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "embedding_reference_support.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/sparse_embedding.hpp"

namespace ember::embedding::testing {

// A batch of `batch` samples with exactly one key in every slot (LocalizedSlotOneHot's input,
// DLRM's): key ranks drawn log-uniformly, so small keys repeat often (hot rows).
HostBatch onehot_batch(std::int64_t batch, const std::vector<std::int64_t>& slot_sizes,
                       std::mt19937_64& rng);

// What a one-rank run with given batch-vector dtypes gives: every step's output (widened to
// f32, exactly) and the final model.
struct DtypeRun {
  std::vector<std::vector<float>> outputs;
  EmbeddingSnapshot snapshot;
};

// Runs the problem's steps on one rank at `place` (a solo communicator): forward_into an
// [batch, slot_num, vec_size] output of out_dtype, then for training steps backward with the
// step's gradient rounded to grad_dtype (a tensor of that dtype) and update.
DtypeRun run_with_dtypes(const Problem& problem, Place place, DType out_dtype, DType grad_dtype);

// `values` rounded to dtype (nearest even) and widened back: what a tensor of that dtype holds.
std::vector<float> round_through(const std::vector<float>& values, DType dtype);

// The kernels' name of a vector dtype.
kernels::ValueType value_type_of(DType dtype);

// Fails the current test unless a and b have the same length and the same bits.
void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b,
                      const std::string& what);

// Fails the current test unless the two runs have the same outputs and models bit for bit.
void expect_same_dtype_runs(const DtypeRun& got, const DtypeRun& want, const std::string& what);

// What a 16-bit exchange between ranks must give: `wide` (f32 outputs and gradients) with its
// gradients rounded to `dtype`, run on `ranks` ranks (GPUs when `cuda`) once as it is and once
// with `dtype` outputs and gradients; fails the current test unless every output of the second
// is the first's rounded once to `dtype` and the final models are the same bits.
void expect_16bit_exchange_is_the_f32_one_rounded(Problem wide, int ranks, bool cuda, DType dtype,
                                                  const std::string& what);

}  // namespace ember::embedding::testing
