// The device-level steps of a sparse embedding, each with a CPU implementation
// (embedding_kernels_cpu.cpp) and a CUDA one (embedding_cuda_*.cu) of the same signature,
// collected in a KernelTable each; callers take the table of their place from kernels::on()
// (the one CPU/CUDA dispatch of the layer). Raw pointers at the rank's place; CUDA calls
// are queued on `stream` and return at once (select_local may wait to read its entry count back,
// see there). Counts that a step produces for later steps (distinct rows, new rows) stay in
// memory at the place, so a training step never waits for the device to learn them.
//
// This header is fmt-free (included by .cu files).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ember/core/device.hpp"
#include "ember/core/half.hpp"
#include "ember/core/place.hpp"
#include "ember/embedding/embedding_values.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/tensor/random.hpp"
#include "ember/tensor/row_gather.hpp"

namespace ember::embedding::kernels {

// ---- shared per-element rules -----------------------------------------------------------------

// Initial value of column `c` of the row of `key`: uniform in [-bound, bound], a function of
// (seed, key, c) only, so it does not depend on insertion order, rank count or device.
EMBER_HOST_DEVICE inline float initial_value(std::uint64_t seed, std::uint64_t key, std::int64_t c,
                                             float bound) {
  const double u = random::uniform01(seed ^ random::mix64(key), static_cast<std::uint64_t>(c));
  return static_cast<float>((2.0 * u - 1.0) * bound);
}

// initial_value with the per-row work done once: initial_value_at(row_init_stream(seed, key), c,
// bound) == initial_value(seed, key, c, bound) bitwise (random::bits with its seed mix hoisted;
// a test holds the two together).
EMBER_HOST_DEVICE inline std::uint64_t row_init_stream(std::uint64_t seed, std::uint64_t key) {
  return random::mix64(seed ^ random::mix64(key));
}
EMBER_HOST_DEVICE inline float initial_value_at(std::uint64_t row_stream, std::int64_t c,
                                                float bound) {
  const std::uint64_t bits =
      random::mix64(row_stream ^ (static_cast<std::uint64_t>(c) * 0xd1b54a32d192ed03ull));
  const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;
  return static_cast<float>((2.0 * u - 1.0) * bound);
}

// The order of every gradient sum, on every device (so the CPU and the GPU agree bitwise): a
// row's occurrences, in entry order, are cut into chunks of kGradientChunk (the last one
// shorter); each chunk is summed from zero in entry order (each grad * scale rounded, then
// added), and the chunk sums are added from zero in chunk order. A row with at most
// kGradientChunk occurrences is therefore one plain sequential sum. The chunks are what lets
// the GPU spread a hot row (tens of thousands of occurrences under power-law keys) over many
// warps instead of one.
constexpr std::int64_t kGradientChunk = 256;

// What bringing a LazyGlobal row from one step to a later one needs.
struct LazyParams {
  optim::OptimizerType type = optim::OptimizerType::SGD;
  float momentum = 0.0f;
  float beta1 = 0.0f, beta2 = 0.0f, epsilon = 0.0f;
  float rmsprop_beta = 0.0f;
  float ftrl_beta = 0.0f, lambda1 = 0.0f, lambda2 = 0.0f;
  // step_values[t - 1], per step t: Adam: lr*sqrt(1-b2^t)/(1-b1^t); Ftrl: the learning rate.
  const float* step_values = nullptr;
};

// Applies the zero-gradient steps from+1 .. to to one weight, as Global would have:
// SGD and AdaGrad do not move on a zero gradient; momentum and Nesterov in closed form
// (m decays by mu per step and w collects the geometric sum); RMSProp's mean square decays by
// beta^n (the weight does not move); Adam replays each step exactly; Ftrl's state does not move
// and its weight is the function of that state at the last step's rate (exact, as Global's).
EMBER_HOST_DEVICE inline void catch_up(const LazyParams& p, float& w, float& s0, float& s1,
                                       std::int64_t from, std::int64_t to) {
  const std::int64_t n = to - from;
  if (n <= 0) return;
  switch (p.type) {
    case optim::OptimizerType::SGD:
    case optim::OptimizerType::AdaGrad:
      return;
    case optim::OptimizerType::MomentumSGD:
    case optim::OptimizerType::Nesterov: {
      const float mu = p.momentum;
      const float mun = powf(mu, static_cast<float>(n));
      // sum_{k=1..n} mu^k (momentum) or mu * sum_{k=1..n} mu^k (Nesterov's extra look-ahead).
      const float geometric = mu == 1.0f ? static_cast<float>(n) : mu * (1.0f - mun) / (1.0f - mu);
      const float gain = p.type == optim::OptimizerType::MomentumSGD ? geometric : mu * geometric;
      w += s0 * gain;
      s0 *= mun;
      return;
    }
    case optim::OptimizerType::RMSProp:
      s0 *= powf(p.rmsprop_beta, static_cast<float>(n));
      return;
    case optim::OptimizerType::Adam: {
      optim::UpdateStep u;
      u.type = optim::OptimizerType::Adam;
      u.beta1 = p.beta1;
      u.beta2 = p.beta2;
      u.epsilon = p.epsilon;
      for (std::int64_t t = from + 1; t <= to; ++t) {
        u.adam_alpha = p.step_values[t - 1];
        optim::apply_update(u, w, 0.0f, s0, s1);
      }
      return;
    }
    case optim::OptimizerType::Ftrl: {
      float inv_lr = 0.0f, l2 = 0.0f;
      optim::ftrl_rate_terms(p.step_values[to - 1], p.ftrl_beta, p.lambda2, inv_lr, l2);
      w = optim::ftrl_weight(s0, s1, p.lambda1, inv_lr, l2);
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
  std::int64_t nnz = 0;  // keys in the global batch
  EMBER_HOST_DEVICE std::int64_t bags() const {
    return sharding == Sharding::Distributed ? batch * slot_num : batch * owned_count;
  }
  // Every key of the batch is this rank's (one rank, or a rank owning every slot): the local
  // CSR then holds exactly nnz entries, known on the host without reading anything back, and
  // is the global CSR itself (bag = global row: owned slots are ascending, so owning all of
  // them means owned_slots[j] == j).
  EMBER_HOST_DEVICE bool selects_all() const {
    return sharding == Sharding::Distributed ? ranks == 1 : owned_count == slot_num;
  }
  // The global CSR row that local bag `bag` pools.
  EMBER_HOST_DEVICE std::int64_t global_row(std::int64_t bag) const {
    if (sharding == Sharding::Distributed) return bag;
    const std::int64_t b = bag / owned_count, j = bag % owned_count;
    return b * slot_num + owned_slots[j];
  }
  // Whether this rank holds `key` (Localized: every key of an owned slot).
  template <class Key>
  EMBER_HOST_DEVICE bool owns(Key key) const {
    if (sharding == Sharding::Localized || ranks == 1) return true;
    return static_cast<std::uint64_t>(key) % static_cast<std::uint64_t>(ranks) ==
           static_cast<std::uint64_t>(rank);
  }
};

// A batch's entries grouped by row (rows ascending, a row's entries in entry order), as the
// update reads them. unique_rows may start with -1 (absent keys in evaluation). The number of
// distinct rows is a word at the place (device memory on CUDA), bounded by `entries`.
struct Segments {
  const std::int32_t* sorted_bags = nullptr;  // [entries]: the bag of each entry, in that order
  const std::int64_t* unique_rows = nullptr;  // [*count]
  const std::int64_t* offsets = nullptr;      // [*count + 1]: row k's entries start at offsets[k]
  const std::int64_t* count = nullptr;        // distinct rows (one i64 at the place)
  std::int64_t entries = 0;                   // n, known on the host
};

// The rows an insert just created, [range[0], range[1]) (two i64 at the place, written by the
// hash table), at most max_rows of them.
struct NewRows {
  const std::int64_t* range = nullptr;
  std::int64_t max_rows = 0;
};

// What a new row starts as: uniform values in [-bound, bound] (initial_value), the optimizer's
// initial states, and last_step = step (Global / LazyGlobal).
struct RowInit {
  std::uint64_t seed = 0;
  float bound = 0.0f;
  float state0 = 0.0f, state1 = 0.0f;
  std::int64_t step = 0;
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
  // HybridSparseEmbedding (running the one-hot code without frequent rows) takes one key per
  // bag, as in HugeCTR: a bag's second entry is then reported like a key outside its slot.
  bool one_key_per_bag = false;
};

// What a HybridSparseEmbedding rank reads of the WHOLE global batch: rows b * S + s, at most
// one key each (keys with their slot offsets), and the frequent index of each key (or -1).
struct HybridArgs {
  const std::int64_t* offsets = nullptr;   // [batch * slot_num + 1]
  const std::int64_t* frequent = nullptr;  // [nnz]: each key's frequent index, -1; null: none
  std::int64_t batch = 0, slot_num = 0;
  std::int64_t local_offset = 0, local_size = 0;  // this rank's samples
  int ranks = 1, rank = 0;
  const std::int64_t* slot_begin = nullptr;  // [slot_num + 1]: slot s holds [begin[s], begin[s+1])
  const std::int64_t* local_base = nullptr;  // [slot_num]: an owned slot's first local row
  std::int64_t owned_count = 0;              // slots s with s % ranks == rank
};

// Where hybrid_rows writes, at the place. A bag "is infrequent" when it holds exactly one key
// and that key is not frequent; the slot's owner (s % ranks) sends its vector.
struct HybridRows {
  std::int64_t* frequent_rows = nullptr;  // [local_size * S]: the key's frequent index, or -1
  std::int64_t* expect = nullptr;         // [local_size * S]: 1 for an infrequent bag, else 0
  // [batch * owned_count], bag b * owned_count + j of the j-th owned slot: the local row of an
  // infrequent bag's key, -1 when that key lies outside its slot, -2 for every other bag.
  std::int64_t* owned_rows = nullptr;
  std::int32_t* used = nullptr;        // optional [F]: 1 at each frequent index the batch uses
  std::int32_t* local_used = nullptr;  // optional [F]: the same for this rank's samples
  // Three i64: the first global bag with several keys or with a key outside its slot (-1:
  // none), its first key and its key count. Such bags read zeros and take no update.
  std::int64_t* bad = nullptr;
};

// The steps that read keys, for one key type.
template <class Key>
struct KeyKernels {
  // Returns the number of entries. On CUDA it reads the count back from the device (one wait)
  // only when a.selects_all() is false; otherwise it is a.nnz and nothing waits.
  std::int64_t (*select_local)(const SelectArgs& a, const Key* keys, std::int64_t* local_offsets,
                               Key* local_keys, std::int64_t* entry_bag, float* scale,
                               StreamHandle stream);
  // rows[e] of one-hot keys. An entry whose key is outside its slot's range (or, with
  // a.one_key_per_bag, that follows another entry of its bag) gets row -1 and is reported in
  // bad[0..2] = {first such entry, its key, its bag}; bad[0] = -1 when none (three i64 at the
  // place; nothing waits, the caller reads them when it likes). Entries come in bag order.
  void (*onehot_rows)(const OneHotArgs& a, const Key* local_keys, const std::int64_t* entry_bag,
                      std::int64_t n, std::int64_t* rows, std::int64_t* bad, StreamHandle stream);
  // Initial values of rows [first, end) (host-known range), rounded to nearest into the table.
  void (*init_rows)(const Values& values, std::int64_t vec_size, std::int64_t first,
                    std::int64_t end, const Key* keys_by_row, std::uint64_t seed, float bound,
                    StreamHandle stream);
  // Starts the rows an insert created (range read at the place): values, states, last_step.
  void (*init_new_rows)(const NewRows& fresh, const Key* keys_by_row, const RowInit& init,
                        const Values& values, std::int64_t vec_size, RowStates states,
                        StreamHandle stream);
  // Starts row rows[i] (its key keys_by_row[rows[i]]) in cache slot slots[i], i < count:
  // what init_new_rows writes at a row, written at a slot (host-backed tables).
  void (*init_rows_at)(const std::int64_t* rows, const std::int64_t* slots, std::int64_t count,
                       const Key* keys_by_row, const RowInit& init, float* values,
                       std::int64_t vec_size, RowStates states, StreamHandle stream);
  // HybridSparseEmbedding: every bag of the global batch is checked (so every rank finds the
  // same bad bag), and the rank's rows are written (HybridRows). Nothing waits.
  void (*hybrid_rows)(const HybridArgs& a, const Key* keys, const HybridRows& out,
                      StreamHandle stream);
};

// Every step of one implementation (CPU or CUDA), as function pointers of the same signatures.
struct KernelTable {
  KeyKernels<std::uint32_t> u32_keys;
  KeyKernels<std::int64_t> i64_keys;

  template <class Key>
  const KeyKernels<Key>& keys() const {
    if constexpr (std::is_same_v<Key, std::uint32_t>) {
      return u32_keys;
    } else {
      static_assert(std::is_same_v<Key, std::int64_t>, "embedding keys are u32 or i64");
      return i64_keys;
    }
  }

  // out[bag] = scale[bag] * sum of values[rows[e]] over the bag's entries (rows -1 skipped):
  // summed in f32 in entry order whatever the table's value type, then written as out_type
  // ([bags, vec_size]; a 16-bit output is the f32 result rounded to nearest even, so the network
  // reads its mixed-precision input straight from here, with no f32 copy and cast between).
  // Without local_offsets (null) bag i's one entry is i (a gather of rows, as the hybrid's
  // frequent rows are pooled); without scale (null) every scale is 1. `entries` is how many
  // entries the bags hold in all (bags without offsets); it only picks the CUDA kernel (bags of
  // one entry or fewer on average are gathered four a thread).
  void (*pool)(const std::int64_t* local_offsets, const std::int64_t* rows, const float* scale,
               std::int64_t bags, std::int64_t entries, const Values& values, std::int64_t vec_size,
               void* out, ValueType out_type, StreamHandle stream);
  // Instead of pooling, where a reader finds each bag's vector (row_gather.hpp): codes[bag] is
  // the row of its one entry (a bag whose one row is -1, or that has no entries, gets the zero
  // code); a bag of several entries, or of one entry with a scale other than 1, gets
  // gather_dense_code(bag) and its vector written to out[bag] exactly as pool() writes it.
  // Rows must be < 2^31 - 1. A warp pools those bags one at a time, a column a lane: a fallback
  // for the rare multi-entry bag of a one-hot layer, not a fast pooling.
  void (*gather_codes)(const std::int64_t* local_offsets, const std::int64_t* rows,
                       const float* scale, std::int64_t bags, const Values& values,
                       std::int64_t vec_size, std::int32_t* codes, void* out, ValueType out_type,
                       StreamHandle stream);
  // Groups the n entries by row (see Segments): sorted_bags [n], unique_rows [n], offsets
  // [n + 1] and *count (one i64). Bags must be < 2^31, rows < capacity. Nothing waits.
  void (*segments)(const std::int64_t* rows, const std::int64_t* entry_bag, std::int64_t n,
                   std::int64_t capacity, std::int32_t* sorted_bags, std::int64_t* unique_rows,
                   std::int64_t* offsets, std::int64_t* count, StreamHandle stream);
  // Brings rows[i] (or row i when rows is null) for i < *count (bound when count is null; at
  // most bound) to step `target` (LazyGlobal).
  void (*catch_up_rows)(const std::int64_t* rows, std::int64_t bound, const std::int64_t* count,
                        const Values& values, std::int64_t vec_size, RowStates states,
                        std::int64_t target, const LazyParams& lazy, StreamHandle stream);
  // Each touched row once: gradient = sum over its entries of grad[bag] * scale[bag] (a null
  // scale is 1) in the kGradientChunk order, then the optimizer step (after a LazyGlobal catch-up
  // when lazy is set); last_step[row] = step. 16-bit values are stepped in f32 and rounded once
  // (embedding_values.hpp). grad is [bags, vec_size] of grad_type: a 16-bit output gradient
  // (mixed precision) is widened as it is read (exactly), so the sums are those of its f32 copy.
  void (*update_rows)(const Segments& seg, const float* scale, const void* grad,
                      ValueType grad_type, const Values& values, std::int64_t vec_size,
                      RowStates states, std::int64_t step, const optim::UpdateStep& u,
                      const LazyParams* lazy, StreamHandle stream);
  // Global: a zero-gradient step for every row r < *rows_in_use (bound when null; at most
  // bound) not yet at `step`.
  void (*update_untouched)(std::int64_t bound, const std::int64_t* rows_in_use,
                           const Values& values, std::int64_t vec_size, RowStates states,
                           std::int64_t step, const optim::UpdateStep& u, StreamHandle stream);
  // dst[i] = src[index[i]] row by row (zeros where index is -1).
  void (*gather_rows)(float* dst, const float* src, const std::int64_t* index, std::int64_t count,
                      std::int64_t vec_size, StreamHandle stream);
  // dst[index[i]] = src[i] row by row.
  void (*scatter_rows)(float* dst, const float* src, const std::int64_t* index, std::int64_t count,
                       std::int64_t vec_size, StreamHandle stream);
  // dst[i] = values[index[i]] row by row, widened to f32 (zeros where index is -1).
  void (*gather_values)(float* dst, const Values& values, const std::int64_t* index,
                        std::int64_t count, std::int64_t vec_size, StreamHandle stream);
  // values[index[i]] = src[i] row by row (f32 rows rounded to nearest into the table).
  void (*scatter_values)(const Values& values, const float* src, const std::int64_t* index,
                         std::int64_t count, std::int64_t vec_size, StreamHandle stream);
  // last_step[r] = value for rows r in [first, end).
  void (*fill_steps)(std::int64_t* last_step, std::int64_t first, std::int64_t end,
                     std::int64_t value, StreamHandle stream);
  // row_slot[rows[e]] = owned_slots[entry_bag[e] % owned_count] for rows in [range[0],
  // range[1]) (two i64 at the place: the rows an insert created).
  void (*record_row_slots)(std::int64_t* row_slot, const std::int64_t* rows,
                           const std::int64_t* entry_bag, std::int64_t n,
                           const std::int64_t* owned_slots, std::int64_t owned_count,
                           const std::int64_t* range, StreamHandle stream);
  // Moves `count` rows of row_bytes bytes each: dst row (dst_index ? dst_index[i] : i) = src row
  // (src_index ? src_index[i] : i). Rows of any column and dtype (values, states, last_step,
  // i32 maps). On CUDA either side may be pinned host memory the device reaches directly
  // (host-backed tables' zero-copy moves); the indices are at the place. Destination rows must
  // be distinct.
  void (*move_rows)(void* dst, const std::int64_t* dst_index, const void* src,
                    const std::int64_t* src_index, std::int64_t count, std::int64_t row_bytes,
                    StreamHandle stream);
  // rows[i] = map[rows[i]] (rows -1 stay -1) for i < *count (bound when count is null; at most
  // bound): a batch's table rows become cache slots (map: -1 where a row has no slot).
  void (*map_rows)(std::int64_t* rows, std::int64_t bound, const std::int64_t* count,
                   const std::int32_t* map, StreamHandle stream);
  // Global on rows brought back from the host: slots[i] (row i when slots is null), i < count,
  // takes the zero-gradient steps last_step + 1 .. target that it missed, step s with steps[s -
  // 1], exactly as update_untouched would have applied them one step at a time (bitwise).
  void (*replay_steps)(const std::int64_t* slots, std::int64_t count, float* values,
                       std::int64_t vec_size, RowStates states, std::int64_t target,
                       const optim::UpdateStep* steps, StreamHandle stream);
  // Stream compaction: the items of positions i < n (item order[i], or i when order is null)
  // whose values[item] lies in [lo, hi], in position order, into out; counts[k] of them come
  // from positions [bounds[k], bounds[k + 1]), k < segments (bounds[segments] == n). bounds and
  // counts at the place; nothing waits.
  void (*select_items)(const std::int64_t* values, const std::int64_t* order, std::int64_t n,
                       std::int64_t lo, std::int64_t hi, const std::int64_t* bounds,
                       std::int64_t segments, std::int64_t* out, std::int64_t* counts,
                       StreamHandle stream);
  // rows[i] = i where marks[i] > 0, else -1, for i < n.
  void (*flagged_rows)(const std::int32_t* marks, std::int64_t n, std::int64_t* rows,
                       StreamHandle stream);
};

// The one place that picks the implementation: the CPU steps for a host place, the CUDA steps
// for a CUDA device (an error in a build without CUDA). Every caller runs its steps through it.
const KernelTable& on(Place place);

// The two implementations behind on() (embedding_kernels_cpu.cpp, embedding_kernels_cuda.cu).
namespace cpu {
const KernelTable& table();
}  // namespace cpu
#if EMBER_WITH_CUDA
namespace cuda {
const KernelTable& table();
}  // namespace cuda
#endif

}  // namespace ember::embedding::kernels
