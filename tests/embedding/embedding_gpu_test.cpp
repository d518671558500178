// The CUDA hash table and sparse embedding against the CPU ones.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <unordered_map>

#include "embedding_reference_support.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/hash_table.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

#define EMBER_REQUIRE_NCCL()                                                     \
  do {                                                                           \
    EMBER_REQUIRE_GPU();                                                         \
    if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL"; \
  } while (0)

template <class Key>
void table_matches_cpu(DType dtype) {
  auto rng = ember::testing::make_rng(sizeof(Key));
  for (std::int64_t n : {1, 7, 1023, 65537, 1 << 20}) {
    const std::int64_t distinct = std::max<std::int64_t>(1, n / 4);
    std::vector<Key> pool(distinct);
    for (auto& k : pool) {
      do {
        k = static_cast<Key>(rng());
      } while (k == static_cast<Key>(~0ull));
    }
    std::vector<Key> keys(n);
    for (auto& k : keys)
      k = pool[rng() % distinct];
    HashTable gpu(dtype, distinct, Place::cuda(0));
    Tensor rows = Tensor::empty({n}, DType::I64, Place::cuda(0));
    const InsertResult fresh = gpu.insert_or_find(Tensor::from_vector(keys, Place::cuda(0)), rows);
    const auto r = rows.to_vector<std::int64_t>();
    std::unordered_map<Key, std::int64_t> seen;
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_GE(r[i], 0);
      auto [it, inserted] = seen.emplace(keys[i], r[i]);
      ASSERT_EQ(it->second, r[i]) << "key " << keys[i] << " got two rows";
    }
    std::set<std::int64_t> distinct_rows;
    for (const auto& [k, row] : seen)
      distinct_rows.insert(row);
    EXPECT_EQ(distinct_rows.size(), seen.size()) << "two keys share a row";
    EXPECT_EQ(gpu.size(), static_cast<std::int64_t>(seen.size()));
    EXPECT_EQ(fresh.end, gpu.size());
    const auto by_row = gpu.keys_by_row().template to_vector<Key>();
    for (const auto& [k, row] : seen)
      EXPECT_EQ(by_row[row], k);
    // find agrees with the insert, absent keys read -1, like the CPU table.
    std::vector<Key> probe = keys;
    for (std::int64_t i = 0; i < n; i += 3)
      probe[i] = static_cast<Key>(rng() | 1);
    Tensor found = Tensor::empty({n}, DType::I64, Place::cuda(0));
    gpu.find(Tensor::from_vector(probe, Place::cuda(0)), found);
    HashTable cpu(dtype, distinct + n, Place::host());
    auto [dk, dr] = gpu.dump();
    cpu.load(dk.to(Place::host()), dr.to(Place::host()));
    Tensor cpu_found = Tensor::empty({n}, DType::I64);
    cpu.find(Tensor::from_vector(probe), cpu_found);
    EXPECT_EQ(found.to_vector<std::int64_t>(), cpu_found.to_vector<std::int64_t>());
  }
}

TEST(HashTableGpu, U32MatchesCpu) {
  EMBER_REQUIRE_GPU();
  table_matches_cpu<std::uint32_t>(DType::U32);
}
TEST(HashTableGpu, I64MatchesCpu) {
  EMBER_REQUIRE_GPU();
  table_matches_cpu<std::int64_t>(DType::I64);
}

TEST(HashTableGpu, HeavyConcurrentInsertsOfCollidingKeys) {
  EMBER_REQUIRE_GPU();
  auto rng = ember::testing::make_rng();
  // 60000 keys into 65536 slots (load 0.92: long probe chains), each key 64 times over,
  // shuffled, so thousands of threads race to claim the same slots.
  const std::int64_t distinct = 60000, repeats = 64, slots = 65536;
  std::vector<std::int64_t> keys;
  for (std::int64_t k = 0; k < distinct; ++k) {
    for (std::int64_t j = 0; j < repeats; ++j)
      keys.push_back(k * 65536);
  }
  std::shuffle(keys.begin(), keys.end(), rng);
  HashTable table(DType::I64, distinct, Place::cuda(0), slots);
  Tensor rows = Tensor::empty({static_cast<std::int64_t>(keys.size())}, DType::I64, Place::cuda(0));
  table.insert_or_find(Tensor::from_vector(keys, Place::cuda(0)), rows);
  const auto r = rows.to_vector<std::int64_t>();
  std::unordered_map<std::int64_t, std::int64_t> seen;
  std::set<std::int64_t> used;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_GE(r[i], 0);
    auto [it, inserted] = seen.emplace(keys[i], r[i]);
    ASSERT_EQ(it->second, r[i]);
    used.insert(r[i]);
  }
  EXPECT_EQ(used.size(), static_cast<std::size_t>(distinct));
  EXPECT_EQ(table.size(), distinct);
  EXPECT_EQ(*used.rbegin(), distinct - 1);
}

TEST(HashTableGpu, FullTableError) {
  EMBER_REQUIRE_GPU();
  HashTable table(DType::U32, 100, Place::cuda(0), 0, "embedding layer 'g'");
  std::vector<std::uint32_t> keys(1000);
  for (std::uint32_t i = 0; i < 1000; ++i)
    keys[i] = 7 * i + 1;
  Tensor rows = Tensor::empty({1000}, DType::I64, Place::cuda(0));
  try {
    table.insert_or_find(Tensor::from_vector(keys, Place::cuda(0)), rows);
    FAIL() << "no error for a full table";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("capacity 100"), std::string::npos) << m;
    EXPECT_NE(m.find("900 new key(s)"), std::string::npos) << m;
  }
  const auto r = rows.to_vector<std::int64_t>();
  std::set<std::int64_t> got;
  for (auto x : r) {
    if (x >= 0) {
      EXPECT_TRUE(got.insert(x).second) << "row " << x << " given twice";
    }
  }
  EXPECT_EQ(got.size(), 100u);
}

TEST(HashTableGpu, AsyncInsertReportsAFullTableAtTheNextCheck) {
  EMBER_REQUIRE_GPU();
  HashTable table(DType::U32, 100, Place::cuda(0), 0, "embedding layer 'g'");
  std::vector<std::uint32_t> keys(1000);
  for (std::uint32_t i = 0; i < 1000; ++i)
    keys[i] = 7 * i + 1;
  const Tensor device_keys = Tensor::from_vector(keys, Place::cuda(0));
  Tensor rows = Tensor::empty({1000}, DType::I64, Place::cuda(0));
  table.insert_or_find_async(device_keys, rows);  // queued: no error yet
  std::int64_t range[2] = {-1, -1};
  copy_bytes(range, Place::host(), table.new_rows(), Place::cuda(0), sizeof range,
             current_stream(0));
  synchronize_stream(current_stream(0));
  EXPECT_EQ(range[0], 0);
  EXPECT_EQ(range[1], 100);
  try {
    table.check();
    FAIL() << "no error for a full table";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("capacity 100"), std::string::npos) << m;
    EXPECT_NE(m.find("900 new key(s)"), std::string::npos) << m;
  }
  const auto r = rows.to_vector<std::int64_t>();
  std::set<std::int64_t> got;
  for (auto x : r) {
    if (x >= 0) {
      EXPECT_TRUE(got.insert(x).second) << "row " << x << " given twice";
    }
  }
  EXPECT_EQ(got.size(), 100u);
  EXPECT_THROW(table.insert_or_find_async(device_keys, rows), Error);  // stays full

  // A reserved key: the next check names it; the other keys got their rows.
  HashTable other(DType::U32, 100, Place::cuda(0));
  Tensor two = Tensor::empty({2}, DType::I64, Place::cuda(0));
  other.insert_or_find_async(
      Tensor::from_vector(std::vector<std::uint32_t>{5, 4294967295u}, Place::cuda(0)), two);
  try {
    (void)other.size();
    FAIL() << "no error for the reserved key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 4294967295"), std::string::npos) << e.what();
  }
  EXPECT_EQ(two.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, -1}));
}

#if EMBER_WITH_CUDA
// Runs kernels::segments and kernels::update_rows on a batch on the CPU and on the GPU (with
// the batch's scale, or with none: every factor 1).
struct UpdateRun {
  std::vector<std::int32_t> sorted_bags;
  std::vector<std::int64_t> unique_rows, offsets, last_step;
  std::int64_t count = 0;
  std::vector<float> values, state;
};

UpdateRun run_update(const testing::UpdateBatch& b, const optim::UpdateStep& u,
                     const kernels::LazyParams* lazy, const std::vector<float>& values,
                     const std::vector<float>& state, const std::vector<std::int64_t>& last_step,
                     std::int64_t step, bool cuda, bool no_scale = false) {
  const Place place = cuda ? Place::cuda(0) : Place::host();
  const auto n = static_cast<std::int64_t>(b.rows.size());
  const Tensor scale = Tensor::from_vector(b.scale, place);
  const Tensor grad = Tensor::from_vector(b.grad, place);
  Tensor w = Tensor::from_vector(values, place);
  Tensor s0 = Tensor::from_vector(state, place);
  Tensor last = Tensor::from_vector(last_step, place);
  const kernels::RowStates st{u.type == optim::OptimizerType::SGD ? nullptr : s0.data<float>(),
                              nullptr, lazy != nullptr ? last.data<std::int64_t>() : nullptr};
  const StreamHandle s = cuda ? current_stream(0) : nullptr;
  const testing::SegmentedBatch seg = testing::segment_batch(b, place, s);
  kernels::on(place).update_rows(
      seg.segments(), no_scale ? nullptr : scale.data<float>(), grad.data<float>(),
      kernels::ValueType::F32, kernels::Values{w.data<float>()}, b.vec_size, st, step, u, lazy, s);
  UpdateRun run;
  run.count = seg.count.to_vector<std::int64_t>()[0];
  const auto all_sorted = seg.sorted_bags.to_vector<std::int32_t>();
  run.sorted_bags.assign(all_sorted.begin(), all_sorted.begin() + n);
  const auto all_unique = seg.unique_rows.to_vector<std::int64_t>();
  run.unique_rows.assign(all_unique.begin(), all_unique.begin() + run.count);
  const auto all_offsets = seg.offsets.to_vector<std::int64_t>();
  run.offsets.assign(all_offsets.begin(), all_offsets.begin() + run.count + 1);
  run.values = w.to_vector<float>();
  run.state = s0.to_vector<float>();
  run.last_step = last.to_vector<std::int64_t>();
  return run;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

#endif  // EMBER_WITH_CUDA

TEST(EmbeddingKernelsGpu, OnePlacePicksEveryCudaStep) {
  EMBER_REQUIRE_GPU();
#if EMBER_WITH_CUDA
  testing::expect_every_step_set(kernels::on(Place::cuda(0)));
  EXPECT_EQ(&kernels::on(Place::cuda(0)), &kernels::cuda::table());
#endif
}

// The GPU's update (hot rows cut into chunks over many warps, the last warp adding the partial
// sums) against the CPU's plain loop: the same segments, gradient sums bitwise equal (SGD at
// rate 1 from zero leaves w = -g), the same result on every run (no race in the last-warp
// hand-over), and AdaGrad and LazyGlobal momentum within float rounding.
TEST(EmbeddingKernelsGpu, UpdateMatchesTheCpuBitwiseOnHotRows) {
  EMBER_REQUIRE_GPU();
#if EMBER_WITH_CUDA
  auto rng = ember::testing::make_rng();
  const std::int64_t C = kernels::kGradientChunk;
  std::vector<std::int64_t> lengths = {1, 2, 7, C - 1, C, C + 1, 2 * C, 2 * C + 1, 1023, 65537};
  for (int i = 0; i < 3000; ++i)
    lengths.push_back(1 + static_cast<std::int64_t>(rng() % 40));
  lengths.push_back(0);
  // 128: 16-byte path, one pass; 260: 16-byte path, three passes (the last one lane wide);
  // 17: the scalar path; 60: 16-byte, narrower than a warp; the narrow path (at most 16
  // columns, a warp's 32 entries loaded at once): 1 (an entry a lane), 2, 7, 11 (DeepFM's
  // width) and 16 (16 lanes an entry).
  for (std::int64_t V : {128, 260, 17, 60, 1, 2, 7, 11, 16}) {
    const testing::UpdateBatch b = testing::random_update_batch(lengths, 50, 20000, V, rng);
    const std::int64_t rows = b.rows_in_table;
    const std::vector<float> zeros(rows * V, 0.0f);
    const std::vector<std::int64_t> steps(rows, 0);
    optim::OptimizerConfig sgd;
    const optim::UpdateStep plain = optim::make_update_step(sgd, 1.0f, 1);
    const UpdateRun cpu = run_update(b, plain, nullptr, zeros, zeros, steps, 1, false);
    const UpdateRun gpu = run_update(b, plain, nullptr, zeros, zeros, steps, 1, true);
    const std::string what = "dim " + std::to_string(V);
    EXPECT_EQ(gpu.count, cpu.count) << what;
    EXPECT_EQ(gpu.unique_rows, cpu.unique_rows) << what;
    EXPECT_EQ(gpu.offsets, cpu.offsets) << what;
    EXPECT_EQ(gpu.sorted_bags, cpu.sorted_bags) << what;
    EXPECT_TRUE(same_bits(gpu.values, cpu.values))
        << what << ": gradient sums differ from the CPU's";
    const UpdateRun again = run_update(b, plain, nullptr, zeros, zeros, steps, 1, true);
    EXPECT_TRUE(same_bits(again.values, gpu.values)) << what << ": two GPU runs differ";
    // No scale (sum combiners, the hybrid): the sums of a scale of ones, on both places.
    testing::UpdateBatch ones = b;
    std::fill(ones.scale.begin(), ones.scale.end(), 1.0f);
    const UpdateRun cpu_ones = run_update(ones, plain, nullptr, zeros, zeros, steps, 1, false);
    const UpdateRun cpu_unit = run_update(b, plain, nullptr, zeros, zeros, steps, 1, false, true);
    const UpdateRun gpu_unit = run_update(b, plain, nullptr, zeros, zeros, steps, 1, true, true);
    EXPECT_TRUE(same_bits(cpu_unit.values, cpu_ones.values)) << what << ": CPU, no scale";
    EXPECT_TRUE(same_bits(gpu_unit.values, cpu_ones.values)) << what << ": GPU, no scale";
    EXPECT_FALSE(same_bits(cpu_unit.values, cpu.values)) << what << ": the scale was all ones";

    // AdaGrad from random weights; LazyGlobal momentum with rows behind by up to 5 steps.
    std::vector<float> w = testing::random_grad(rows * V, rng), acc(rows * V);
    for (auto& a : acc)
      a = 0.1f + static_cast<float>(rng() % 100) / 50.0f;
    optim::OptimizerConfig adagrad;
    adagrad.type = optim::OptimizerType::AdaGrad;
    const optim::UpdateStep ada = optim::make_update_step(adagrad, 0.05f, 1);
    const UpdateRun cpu_ada = run_update(b, ada, nullptr, w, acc, steps, 1, false);
    const UpdateRun gpu_ada = run_update(b, ada, nullptr, w, acc, steps, 1, true);
    EXPECT_LE(testing::max_relative_error(gpu_ada.values, cpu_ada.values), 1e-5) << what;
    EXPECT_LE(testing::max_relative_error(gpu_ada.state, cpu_ada.state), 1e-5) << what;

    optim::OptimizerConfig momentum;
    momentum.type = optim::OptimizerType::MomentumSGD;
    momentum.update_type = optim::UpdateType::LazyGlobal;
    momentum.momentum_factor = 0.9f;
    const optim::UpdateStep mom = optim::make_update_step(momentum, 0.05f, 6);
    kernels::LazyParams lazy;
    lazy.type = optim::OptimizerType::MomentumSGD;
    lazy.momentum = 0.9f;
    std::vector<std::int64_t> behind(rows);
    for (auto& t : behind)
      t = static_cast<std::int64_t>(rng() % 6);
    const UpdateRun cpu_mom = run_update(b, mom, &lazy, w, acc, behind, 6, false);
    const UpdateRun gpu_mom = run_update(b, mom, &lazy, w, acc, behind, 6, true);
    EXPECT_LE(testing::max_relative_error(gpu_mom.values, cpu_mom.values), 1e-5) << what;
    EXPECT_LE(testing::max_relative_error(gpu_mom.state, cpu_mom.state), 1e-5) << what;
    EXPECT_EQ(gpu_mom.last_step, cpu_mom.last_step) << what;
  }
#endif
}

TEST(EmbeddingKernelsGpu, NewRowsStartLikeTheCpuBitwise) {
  EMBER_REQUIRE_GPU();
#if EMBER_WITH_CUDA
  auto rng = ember::testing::make_rng();
  for (std::int64_t V : {128, 7}) {
    const std::int64_t rows = 5000;
    std::vector<std::int64_t> keys(rows);
    for (auto& k : keys)
      k = static_cast<std::int64_t>(rng() >> 1);
    const std::vector<std::int64_t> range = {123, 4321};
    kernels::RowInit init;
    init.seed = rng();
    init.bound = 0.05f;
    init.state0 = 0.5f;
    init.step = 9;
    std::vector<std::vector<float>> values;
    std::vector<std::vector<std::int64_t>> steps;
    for (bool cuda : {false, true}) {
      const Place place = cuda ? Place::cuda(0) : Place::host();
      const Tensor k = Tensor::from_vector(keys, place), r = Tensor::from_vector(range, place);
      Tensor w = Tensor::full({rows, V}, 3.0f, DType::F32, place);
      Tensor s0 = Tensor::full({rows, V}, 3.0f, DType::F32, place);
      Tensor last = Tensor::full({rows}, -1, DType::I64, place);
      kernels::on(place).keys<std::int64_t>().init_new_rows(
          kernels::NewRows{r.data<std::int64_t>(), rows}, k.data<std::int64_t>(), init,
          kernels::Values{w.data<float>()}, V,
          kernels::RowStates{s0.data<float>(), nullptr, last.data<std::int64_t>()},
          cuda ? current_stream(0) : nullptr);
      values.push_back(w.to_vector<float>());
      const auto st = s0.to_vector<float>();
      values.back().insert(values.back().end(), st.begin(), st.end());
      steps.push_back(last.to_vector<std::int64_t>());
    }
    EXPECT_TRUE(same_bits(values[1], values[0])) << "dim " << V;
    EXPECT_EQ(steps[1], steps[0]) << "dim " << V;
  }
#endif
}

// On a GPU the training step does not wait for the device, so a full table and a one-hot key
// outside its slot are raised by the next forward (or host query), naming the numbers.
TEST(SparseEmbeddingGpu, DeviceFoundErrorsAreRaisedByTheNextCall) {
  EMBER_REQUIRE_NCCL();
  auto comms = distributed::make_nccl_communicators({0});
  optim::OptimizerConfig o;
  o.schedule.base_lr = 0.1f;
  {
    EmbeddingConfig c;
    c.name = "full";
    c.type = EmbeddingType::DistributedSlotHash;
    c.vec_size = 8;
    c.slot_num = 1;
    c.max_vocabulary_size_per_gpu = 5;
    c.key_dtype = DType::I64;
    SparseEmbedding emb(c, o, *comms[0]);
    const CsrTensor batch(
        Tensor::from_vector(std::vector<std::int64_t>{0, 4, 8}, Place::cuda(0)),
        Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8}, Place::cuda(0)), 8);
    const std::vector<float> out = emb.forward(batch, 0, 2).to_vector<float>();
    emb.backward(Tensor::zeros({2, 1, 8}, DType::F32, Place::cuda(0)));
    emb.update();
    // Which 5 keys found a row is a race, but each bag must be the sum of the initial rows of
    // some of its own keys, 5 keys in all; the others read zeros, never another key's row.
    int explained = 0;
    for (unsigned s0 = 0; s0 < 16; ++s0) {
      for (unsigned s1 = 0; s1 < 16; ++s1) {
        if (std::popcount(s0) + std::popcount(s1) != 5) continue;
        bool match = true;
        for (int col = 0; col < 8 && match; ++col) {
          float a = 0.0f, b = 0.0f;
          for (int k = 0; k < 4; ++k) {
            if (s0 >> k & 1u) {
              a += kernels::initial_value(c.seed, static_cast<std::uint64_t>(1 + k), col,
                                          c.init_bound);
            }
            if (s1 >> k & 1u) {
              b += kernels::initial_value(c.seed, static_cast<std::uint64_t>(5 + k), col,
                                          c.init_bound);
            }
          }
          match = std::abs(out[col] - a) <= 1e-6f && std::abs(out[8 + col] - b) <= 1e-6f;
        }
        explained += match;
      }
    }
    EXPECT_GE(explained, 1) << "the forward output is not a sum of the batch's own rows";
    try {
      emb.forward(batch, 0, 2);
      FAIL() << "a full table must be an error";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'full'"), std::string::npos) << m;
      EXPECT_NE(m.find("capacity 5"), std::string::npos) << m;
      EXPECT_NE(m.find("3 new key(s)"), std::string::npos) << m;
      EXPECT_NE(m.find("max_vocabulary_size_per_gpu"), std::string::npos) << m;
    }
  }
  {
    EmbeddingConfig c;
    c.name = "onehot";
    c.type = EmbeddingType::LocalizedSlotOneHot;
    c.vec_size = 8;
    c.slot_num = 2;
    c.slot_size_array = {4, 6};
    c.key_dtype = DType::U32;
    SparseEmbedding emb(c, o, *comms[0]);
    // Slot 1 spans keys [4, 10); key 2 belongs to slot 0.
    const CsrTensor bad(Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2}, Place::cuda(0)),
                        Tensor::from_vector(std::vector<std::uint32_t>{1, 2}, Place::cuda(0)), 2);
    emb.forward(bad, 0, 1);
    try {
      (void)emb.snapshot();
      FAIL() << "a one-hot key outside its slot must be an error";
    } catch (const DataError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("key 2"), std::string::npos) << m;
      EXPECT_NE(m.find("slot 1"), std::string::npos) << m;
      EXPECT_NE(m.find("[4, 10)"), std::string::npos) << m;
    }
  }
}

EmbeddingConfig gpu_config(EmbeddingType type, Combiner combiner, DType key, std::uint64_t seed,
                           std::int64_t vec_size) {
  EmbeddingConfig c;
  c.name = "gpu_emb";
  c.type = type;
  c.vec_size = vec_size;
  c.combiner = combiner;
  c.slot_num = 5;
  c.max_vocabulary_size_per_gpu = 5000;
  if (type != EmbeddingType::DistributedSlotHash) c.slot_size_array = {70, 200, 3, 500, 110};
  c.key_dtype = key;
  c.seed = seed;
  return c;
}

TEST(SparseEmbeddingGpu, MatchesCpuForEveryTypeOptimizerAndUpdateType) {
  EMBER_REQUIRE_NCCL();
  auto rng = ember::testing::make_rng();
  const std::vector<std::int64_t> sizes = {70, 200, 3, 500, 110};
  for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::LocalizedSlotOneHot}) {
    for (optim::OptimizerType ot :
         {optim::OptimizerType::SGD, optim::OptimizerType::MomentumSGD,
          optim::OptimizerType::Nesterov, optim::OptimizerType::Adam, optim::OptimizerType::AdaGrad,
          optim::OptimizerType::RMSProp, optim::OptimizerType::Ftrl}) {
      for (optim::UpdateType ut :
           {optim::UpdateType::Local, optim::UpdateType::Global, optim::UpdateType::LazyGlobal}) {
        // vec_size 128 takes the 16-byte pooling path, 7 the scalar one.
        const std::int64_t V = (static_cast<int>(ot) % 2 == 0) ? 128 : 7;
        testing::Problem p;
        p.config = gpu_config(type, static_cast<int>(ut) % 2 ? Combiner::Mean : Combiner::Sum,
                              static_cast<int>(ot) % 2 ? DType::U32 : DType::I64, rng(), V);
        p.optimizer.type = ot;
        p.optimizer.update_type = ut;
        p.optimizer.schedule.base_lr = 0.05f;
        p.optimizer.momentum_factor = 0.9f;
        p.optimizer.ftrl_beta = 0.5f;
        p.optimizer.lambda1 = 0.001f;
        p.optimizer.lambda2 = 0.01f;
        for (int t = 0; t < 4; ++t) {
          p.batches.push_back(testing::random_batch(64, sizes, 6, rng));
          p.grads.push_back(testing::random_grad(64 * 5 * V, rng));
          p.training.push_back(t != 2);
        }
        const auto cpu = testing::run_ranks(p, 1, false);
        const auto gpu = testing::run_ranks(p, 1, true);
        testing::expect_same_run(gpu, cpu, 1e-4,
                                 std::string(embedding_type_name(type)) + " " +
                                     optim::optimizer_name(ot) + "/" + optim::update_type_name(ut));
        EXPECT_EQ(gpu.rows_in_use_per_step, cpu.rows_in_use_per_step);
      }
    }
  }
}

TEST(SparseEmbeddingGpu, AllDevicesWithNcclMatchOneCpuRank) {
  EMBER_REQUIRE_NCCL();
  const int D = cuda_device_count();
  auto rng = ember::testing::make_rng();
  const std::vector<std::int64_t> sizes = {70, 200, 3, 500, 110};
  for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                             EmbeddingType::LocalizedSlotOneHot}) {
    testing::Problem p;
    p.config = gpu_config(type, Combiner::Mean, DType::I64, rng(), 32);
    p.optimizer.type = optim::OptimizerType::Adam;
    p.optimizer.update_type = optim::UpdateType::LazyGlobal;
    p.optimizer.schedule.base_lr = 0.01f;
    for (int t = 0; t < 3; ++t) {
      p.batches.push_back(testing::random_batch(16 * D, sizes, 4, rng));
      p.grads.push_back(testing::random_grad(16 * D * 5 * 32, rng));
      p.training.push_back(true);
    }
    testing::expect_same_run(
        testing::run_ranks(p, D, true), testing::run_ranks(p, 1, false), 1e-4,
        std::string(embedding_type_name(type)) + " on " + std::to_string(D) + " GPU(s)");
  }
}

}  // namespace
}  // namespace ember::embedding
