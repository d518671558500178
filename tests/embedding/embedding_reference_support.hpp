// Test helpers for the sparse embedding: random problems (batches and output gradients), a plain
// reference (a std::unordered_map of vectors and dense loops), and a driver that runs D ranks as
// threads over in-process (host) or NCCL (CUDA) communicators.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/sparse_embedding.hpp"

namespace ember::embedding::testing {

// A parameterised test's case: an embedding type on a number of ranks, printed and named by
// gtest as "<type> with <D> rank(s)" and "<Distributed|LocalizedHash|OneHot|Hybrid>_D<D>".
struct Case {
  EmbeddingType type;
  int ranks;
};
void PrintTo(const Case& c, std::ostream* os);
std::string case_name(const ::testing::TestParamInfo<Case>& info);

// A global batch as host vectors (keys carry slot offsets; rows b * slot_num + s).
struct HostBatch {
  std::int64_t batch = 0;
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> keys;
};

struct Problem {
  EmbeddingConfig config;
  optim::OptimizerConfig optimizer;
  std::vector<HostBatch> batches;         // one per step
  std::vector<std::vector<float>> grads;  // per step: batch x slot_num x vec_size
  std::vector<bool> training;             // per step; evaluation steps take no update
  float loss_scaler = 1.0f;
  // Each training step prefetches the next training batch, as the session does (a device hash
  // table only the batch of the very next step: it inserts the batch's keys ahead).
  bool prefetch = false;
  // GPU, with prefetch: each prefetch is told its keys are ready by an event, as the session's
  // pipeline does, while the compute stream still runs long writes to memory already freed on
  // the host (what a step leaves behind at scale).
  bool busy_compute = false;
  // Runs steps [first_step, batches.size()) only, loading the model from load_before first and
  // saving it to save_after at the end (when given).
  std::size_t first_step = 0;
  std::filesystem::path load_before, save_after;
  // The batch vectors' dtypes (mixed precision's 16-bit): run_ranks pools into an output of
  // out_dtype (forward_into; the outputs it reports are widened to f32, exactly) and feeds each
  // step's gradient as a tensor of grad_dtype (the values rounded to it).
  DType out_dtype = DType::F32;
  DType grad_dtype = DType::F32;
  // One rank: training steps take SparseEmbedding::forward_gather (codes, and only the bags of
  // several entries pooled into an output of out_dtype), and the outputs it reports are the
  // vectors the codes name (table rows read as they are stored, zeros, the pooled rows).
  bool gather = false;
};

// Random batches of `batch` samples: per (sample, slot) 0..max_nnz keys drawn from the slot's
// range of slot_sizes (so keys repeat within a slot and across samples; some slots are empty).
HostBatch random_batch(std::int64_t batch, const std::vector<std::int64_t>& slot_sizes, int max_nnz,
                       std::mt19937_64& rng);
std::vector<float> random_grad(std::int64_t n, std::mt19937_64& rng);
// A batch as the layer takes it: keys of `key_dtype`, offsets and keys at `place`.
CsrTensor to_csr(const HostBatch& h, DType key_dtype, Place place = Place::host());

// Slot sizes small enough that keys repeat within a batch, and a layer "emb" over slots of
// `slot_sizes` (at most `rows` rows a rank; DistributedSlot without the slot sizes).
inline const std::vector<std::int64_t> kSmallSlotSizes = {7, 20, 3, 50, 11};
EmbeddingConfig small_config(EmbeddingType type, Combiner combiner, DType key_dtype,
                             std::int64_t vec_size, std::uint64_t seed,
                             const std::vector<std::int64_t>& slot_sizes = kSmallSlotSizes,
                             std::int64_t rows = 200);

// Every sparse optimizer and update type, for tests that go through them all.
inline constexpr optim::OptimizerType kEveryOptimizer[] = {
    optim::OptimizerType::SGD,  optim::OptimizerType::MomentumSGD, optim::OptimizerType::Nesterov,
    optim::OptimizerType::Adam, optim::OptimizerType::AdaGrad,     optim::OptimizerType::RMSProp,
    optim::OptimizerType::Ftrl};
inline constexpr optim::UpdateType kEveryUpdateType[] = {
    optim::UpdateType::Local, optim::UpdateType::Global, optim::UpdateType::LazyGlobal};

// The optimizer settings the embedding tests share: rates that move the weights visibly within a
// few steps, a short warm-up, and every optimizer's own parameters away from their defaults.
optim::OptimizerConfig test_optimizer(optim::OptimizerType type, optim::UpdateType update,
                                      int warmup_steps = 2);

// The `count` keys the problem's batches use most (ties: the smaller key), ascending: the hot
// set HybridSparseEmbedding's tests replicate.
std::vector<std::int64_t> most_used_keys(const Problem& p, std::size_t count);

// The whole-model outputs of every step ([batch, slot_num, vec_size] each, sample order) and
// the final model sorted by key.
struct RunResult {
  std::vector<std::vector<float>> outputs;
  EmbeddingSnapshot snapshot;
  std::vector<std::int64_t> rows_in_use_per_step;     // summed over ranks
  std::vector<CacheStats> cache_stats;                // per rank, host tables only
  std::vector<std::int64_t> forwards_prepared_ahead;  // per rank, device tables
  // Per rank, the collectives backward() and update() called over the run's training steps.
  std::vector<std::int64_t> collectives_in_backward, collectives_in_update;
};

// Whether two runs are the same bit for bit: every output, the final model, the row counts.
void expect_identical_runs(const RunResult& got, const RunResult& want, const std::string& what);

// Runs the problem with D ranks on the host (in-process communicators) or on CUDA devices
// (NCCL, devices 0..D-1). `between` runs on every rank after each step (for save/load tests).
RunResult run_ranks(const Problem& problem, int ranks, bool cuda = false);

// The reference: a map from key to row, Global semantics for both Global and LazyGlobal.
RunResult run_reference(const Problem& problem);

// Max |a - b| / (1 + |b|) over two equal-length vectors (inf if the lengths differ).
double max_relative_error(const std::vector<float>& a, const std::vector<float>& b);

// Fails the current test unless the two runs agree within `tolerance`.
void expect_same_run(const RunResult& got, const RunResult& want, double tolerance,
                     const std::string& what);

// ---- the update step alone (kernels::segments + kernels::update_rows) ----

// One rank's batch as the update sees it: entry e looks up rows[e] (-1: an absent key) from bag
// entry_bag[e]; row i (0 <= i < lengths.size()) occurs lengths[i] times, the entries shuffled.
struct UpdateBatch {
  std::int64_t rows_in_table = 0, bags = 0, vec_size = 0;
  std::vector<std::int64_t> rows, entry_bag;
  std::vector<float> scale;  // [bags]: 1 or 1 / nnz, like the combiners
  std::vector<float> grad;   // [bags, vec_size]
};
UpdateBatch random_update_batch(const std::vector<std::int64_t>& lengths, std::int64_t absent,
                                std::int64_t bags, std::int64_t vec_size, std::mt19937_64& rng);

// A batch's entries grouped by row at a place (kernels::segments, queued on `stream`), for
// kernels::update_rows.
struct SegmentedBatch {
  Tensor sorted_bags, unique_rows, offsets, count;
  std::int64_t entries = 0;
  kernels::Segments segments() const {
    return {sorted_bags.data<std::int32_t>(), unique_rows.data<std::int64_t>(),
            offsets.data<std::int64_t>(), count.data<std::int64_t>(), entries};
  }
};
SegmentedBatch segment_batch(const UpdateBatch& b, Place place, StreamHandle stream);

// Row r's gradient in the kGradientChunk order, by a plain loop over the entries (no sort):
// chunks of kGradientChunk consecutive occurrences in entry order, each summed from zero, the
// chunk sums added from zero. [rows_in_table, vec_size].
std::vector<float> chunked_gradient_sums(const UpdateBatch& b);

// The same sums in double precision, in any order, and the sums of magnitudes (error bounds).
void exact_gradient_sums(const UpdateBatch& b, std::vector<double>& sum,
                         std::vector<double>& magnitude);

// Fails the current test unless every step of the table is set (a table whose initialiser
// forgets a step leaves it null).
void expect_every_step_set(const kernels::KernelTable& table);

}  // namespace ember::embedding::testing
