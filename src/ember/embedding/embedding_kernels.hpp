// The device-level steps of a sparse embedding, each with a CPU implementation (namespace
// kernels::cpu, embedding_kernels_cpu.cpp) and a CUDA one (kernels::cuda,
// embedding_kernels_cuda.cu) of the same signature. Raw pointers at the rank's place; CUDA calls
// are queued on `stream` and return at once unless they return a count.
//
// This header is fmt-free (included by .cu files).
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/core/device.hpp"
#include "ember/core/half.hpp"
#include "ember/embedding/optimizer.hpp"
#include "ember/tensor/random.hpp"

namespace ember::embedding::kernels {

// ---- shared per-element rules -----------------------------------------------------------------

// Initial value of column `c` of the row of `key`: uniform in [-bound, bound], a function of
// (seed, key, c) only, so it does not depend on insertion order, rank count or device.
EMBER_HOST_DEVICE inline float initial_value(std::uint64_t seed, std::uint64_t key, std::int64_t c,
                                             float bound) {
  const double u = random::uniform01(seed ^ random::mix64(key), static_cast<std::uint64_t>(c));
  return static_cast<float>((2.0 * u - 1.0) * bound);
}

// What bringing a LazyGlobal row from one step to a later one needs.
struct LazyParams {
  OptimizerType type = OptimizerType::SGD;
  float momentum = 0.0f;
  float beta1 = 0.0f, beta2 = 0.0f, epsilon = 0.0f;
  const float* adam_alpha = nullptr;  // adam_alpha[t - 1]: step t's lr*sqrt(1-b2^t)/(1-b1^t)
};

// Applies the zero-gradient steps from+1 .. to to one weight, as Global would have:
// SGD and AdaGrad do not move on a zero gradient; momentum and Nesterov in closed form
// (m decays by mu per step and w collects the geometric sum); Adam replays each step exactly.
EMBER_HOST_DEVICE inline void catch_up(const LazyParams& p, float& w, float& s0, float& s1,
                                       std::int64_t from, std::int64_t to) {
  const std::int64_t n = to - from;
  if (n <= 0) return;
  switch (p.type) {
    case OptimizerType::SGD:
    case OptimizerType::AdaGrad:
      return;
    case OptimizerType::MomentumSGD:
    case OptimizerType::Nesterov: {
      const float mu = p.momentum;
      const float mun = powf(mu, static_cast<float>(n));
      // sum_{k=1..n} mu^k (momentum) or mu * sum_{k=1..n} mu^k (Nesterov's extra look-ahead).
      const float geometric = mu == 1.0f ? static_cast<float>(n) : mu * (1.0f - mun) / (1.0f - mu);
      const float gain = p.type == OptimizerType::MomentumSGD ? geometric : mu * geometric;
      w += s0 * gain;
      s0 *= mun;
      return;
    }
    case OptimizerType::Adam: {
      UpdateStep u;
      u.type = OptimizerType::Adam;
      u.beta1 = p.beta1;
      u.beta2 = p.beta2;
      u.epsilon = p.epsilon;
      for (std::int64_t t = from + 1; t <= to; ++t) {
        u.adam_alpha = p.adam_alpha[t - 1];
        apply_update(u, w, 0.0f, s0, s1);
      }
      return;
    }
  }
}

// ---- the steps ----------------------------------------------------------------------------

enum class Sharding : std::uint8_t { Distributed, Localized };

// Picks this rank's keys out of the global batch CSR (rows b * S + s) into a local CSR whose
// rows ("bags") are what this rank pools: Distributed: all B * S rows, keys with key % D == rank;
// Localized: B * S_r rows (b * S_r + j for the rank's j-th slot owned_slots[j]), all their keys.
// scale[bag] is 1 (sum) or 1 / nnz of the global row (mean; 0 when empty).
struct SelectArgs {
  const std::int64_t* offsets = nullptr;  // [B * S + 1]
  std::int64_t batch = 0, slot_num = 0;
  int ranks = 1, rank = 0;
  Sharding sharding = Sharding::Distributed;
  bool mean = false;
  const std::int64_t* owned_slots = nullptr;  // Localized: [owned_count], at the rank's place
  std::int64_t owned_count = 0;
  EMBER_HOST_DEVICE std::int64_t bags() const {
    return sharding == Sharding::Distributed ? batch * slot_num : batch * owned_count;
  }
};

// The sorted view of a batch's entries by row: entries of one row are consecutive, in entry
// order; rows ascending. unique_rows may hold -1 (absent keys in evaluation) first.
struct Segments {
  const std::int64_t* sorted_entries = nullptr;  // [n]
  const std::int64_t* unique_rows = nullptr;     // [count]
  const std::int64_t* offsets = nullptr;         // [count + 1]
  std::int64_t count = 0;
};

// Optimizer state columns (nullptr when the optimizer has fewer).
struct RowStates {
  float* s0 = nullptr;
  float* s1 = nullptr;
  std::int64_t* last_step = nullptr;  // Global / LazyGlobal: step each row is current to
};

// One-hot slot geometry of a rank's owned slots j: keys [begin[j], begin[j] + size[j]) map to
// local rows local_base[j] + (key - begin[j]).
struct OneHotArgs {
  const std::int64_t* begin = nullptr;
  const std::int64_t* size = nullptr;
  const std::int64_t* local_base = nullptr;
  std::int64_t owned_count = 0;
};

#define EMBER_EMBEDDING_KERNELS(Key)                                                           \
  std::int64_t select_local(const SelectArgs& a, const Key* keys, std::int64_t* local_offsets, \
                            Key* local_keys, std::int64_t* entry_bag, float* scale,            \
                            StreamHandle stream);                                              \
  /* Returns the first entry whose key is outside its slot's range, or -1. */                  \
  std::int64_t onehot_rows(const OneHotArgs& a, const Key* local_keys,                         \
                           const std::int64_t* entry_bag, std::int64_t n, std::int64_t* rows,  \
                           StreamHandle stream);                                               \
  void init_rows(float* values, std::int64_t vec_size, std::int64_t first, std::int64_t end,   \
                 const Key* keys_by_row, std::uint64_t seed, float bound, StreamHandle stream);

namespace cpu {
EMBER_EMBEDDING_KERNELS(std::uint32_t)
EMBER_EMBEDDING_KERNELS(std::int64_t)
}  // namespace cpu
namespace cuda {
EMBER_EMBEDDING_KERNELS(std::uint32_t)
EMBER_EMBEDDING_KERNELS(std::int64_t)
}  // namespace cuda
#undef EMBER_EMBEDDING_KERNELS

#define EMBER_EMBEDDING_ROW_KERNELS                                                                \
  /* out[bag] = scale[bag] * sum of values[rows[e]] over the bag's entries (rows -1 skipped). */   \
  void pool(const std::int64_t* local_offsets, const std::int64_t* rows, const float* scale,       \
            std::int64_t bags, const float* values, std::int64_t vec_size, float* out,             \
            StreamHandle stream);                                                                  \
  /* Sorts entries by row; fills the three arrays (capacity n each, offsets n + 1) and returns  */ \
  /* the number of distinct rows. */                                                               \
  std::int64_t segments(const std::int64_t* rows, std::int64_t n, std::int64_t capacity,           \
                        std::int64_t* sorted_entries, std::int64_t* unique_rows,                   \
                        std::int64_t* offsets, StreamHandle stream);                               \
  /* Brings rows (or rows 0..count-1 when rows is null) to step `target` (LazyGlobal). */          \
  void catch_up_rows(const std::int64_t* rows, std::int64_t count, float* values,                  \
                     std::int64_t vec_size, RowStates states, std::int64_t target,                 \
                     const LazyParams& lazy, StreamHandle stream);                                 \
  /* Each touched row once: gradient = sum over its entries of grad[bag] * scale[bag], then the */ \
  /* optimizer step (after a LazyGlobal catch-up when lazy is set); last_step[row] = step.      */ \
  void update_rows(const Segments& seg, const std::int64_t* entry_bag, const float* scale,         \
                   const float* grad, float* values, std::int64_t vec_size, RowStates states,      \
                   std::int64_t step, const UpdateStep& u, const LazyParams* lazy,                 \
                   StreamHandle stream);                                                           \
  /* Global: a zero-gradient step for every row in [0, rows) not yet at `step`. */                 \
  void update_untouched(std::int64_t rows, float* values, std::int64_t vec_size, RowStates states, \
                        std::int64_t step, const UpdateStep& u, StreamHandle stream);              \
  /* dst[i] = src[index[i]] row by row (zeros where index is -1). */                               \
  void gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t count,    \
                   std::int64_t vec_size, StreamHandle stream);                                    \
  /* dst[index[i]] = src[i] row by row. */                                                         \
  void scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t count,   \
                    std::int64_t vec_size, StreamHandle stream);                                   \
  /* last_step[r] = value for rows r in [first, end). */                                           \
  void fill_steps(std::int64_t* last_step, std::int64_t first, std::int64_t end,                   \
                  std::int64_t value, StreamHandle stream);                                        \
  /* row_slot[rows[e]] = owned_slots[entry_bag[e] % owned_count] for rows in [first, end). */      \
  void record_row_slots(std::int64_t* row_slot, const std::int64_t* rows,                          \
                        const std::int64_t* entry_bag, std::int64_t n,                             \
                        const std::int64_t* owned_slots, std::int64_t owned_count,                 \
                        std::int64_t first, std::int64_t end, StreamHandle stream);

namespace cpu {
EMBER_EMBEDDING_ROW_KERNELS
}  // namespace cpu
namespace cuda {
EMBER_EMBEDDING_ROW_KERNELS
}  // namespace cuda
#undef EMBER_EMBEDDING_ROW_KERNELS

}  // namespace ember::embedding::kernels
