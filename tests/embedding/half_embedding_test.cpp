// Embedding tables stored in f16 and bf16 (EmbeddingConfig::value_dtype) on CPU ranks: the
// rounding rules alone, the update step bitwise against a plain loop that models the rounding,
// the layer against the reference (which rounds as the layer does) for every optimizer and
// update type, what stochastic rounding is for, and checkpoints between f32 and 16-bit tables.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <thread>

#include "embedding_reference_support.hpp"
#include "ember/core/error.hpp"
#include "ember/embedding/embedding_values.hpp"
#include "ember/embedding/sparse_embedding.hpp"
#include "support/test_support.hpp"

namespace ember::embedding {
namespace {

using kernels::Rounding;
using kernels::ValueType;
using testing::Problem;

const std::vector<std::int64_t> kSlotSizes = {7, 20, 3, 50, 11};

const char* name_of(DType t) {
  return t == DType::F16 ? "f16" : "bf16";
}

template <class V>
float widen(V v) {
  return static_cast<float>(v);
}

// ---- the rounding rules ----------------------------------------------------------------------

template <class V>
void check_rounding(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int trial = 0; trial < 2000; ++trial) {
    float x = dist(rng) * std::pow(2.0f, static_cast<float>(static_cast<int>(rng() % 40) - 30));
    if (trial == 0) x = 0.0f;
    if (trial == 1) x = 3e-8f;  // under f16's smallest subnormal
    const V nearest = V(x);
    EXPECT_EQ(kernels::round_value<V>(x, Rounding::Nearest, 12345).bits, nearest.bits) << x;
    // Stochastic: always x's neighbours, the far one with probability distance / ulp.
    const float a = widen(nearest);
    int far = 0;
    float other = a;
    constexpr int kDraws = 4096;
    for (int k = 0; k < kDraws; ++k) {
      const std::uint32_t u = static_cast<std::uint32_t>(k) << 12;  // a uniform grid of [0, 1)
      const float got = widen(kernels::round_value<V>(x, Rounding::Stochastic, u));
      if (got == a) continue;
      ++far;
      if (other != a) {
        EXPECT_EQ(got, other) << x;
      }
      other = got;
      EXPECT_TRUE((a < x && x < got) || (got < x && x < a)) << x << " -> " << got;
    }
    if (a == x) {
      EXPECT_EQ(far, 0) << x;
    } else if (far > 0) {
      const double p =
          std::abs(static_cast<double>(x) - a) / std::abs(static_cast<double>(other) - a);
      EXPECT_NEAR(static_cast<double>(far) / kDraws, p, 1.0 / kDraws + 1e-9) << x;
    } else {
      // Never the far side: then it is at most a grid step likely.
      const float up = std::nextafter(a, x);
      EXPECT_NE(up, x) << x;
    }
  }
  // Infinities and nan stay what round to nearest makes of them.
  EXPECT_TRUE(std::isinf(widen(kernels::round_value<V>(INFINITY, Rounding::Stochastic, 0))));
  EXPECT_TRUE(std::isnan(widen(kernels::round_value<V>(NAN, Rounding::Stochastic, 0))));
}

TEST(HalfEmbeddingRounding, NearestIsRoundToNearestEvenAndStochasticIsUnbiased) {
  auto rng = ember::testing::make_rng();
  check_rounding<Half>(rng);
  check_rounding<BFloat16>(rng);
}

TEST(HalfEmbeddingRounding, BitsDependOnValuesNotOnWhereTheyAre) {
  const std::uint64_t seed = kernels::rounding_seed(7);
  const std::uint64_t key = kernels::rounding_key(seed, 3);
  EXPECT_EQ(kernels::rounding_bits(key, 5, 0.5f), kernels::rounding_bits(key, 5, 0.5f));
  EXPECT_NE(key, kernels::rounding_key(seed, 4));
  EXPECT_NE(kernels::rounding_bits(key, 5, 0.5f),
            kernels::rounding_bits(kernels::rounding_key(seed, 4), 5, 0.5f));
  EXPECT_NE(kernels::rounding_bits(key, 5, 0.5f), kernels::rounding_bits(key, 6, 0.5f));
  EXPECT_NE(kernels::rounding_bits(key, 5, 0.5f), kernels::rounding_bits(key, 5, 0.25f));
  EXPECT_LT(kernels::rounding_bits(key, 5, 0.5f), 1u << 24);
}

// The draws over a table's columns and old values, and from one step to the next, look like
// independent uniform 24-bit numbers: every bit set half of the time, the mean a half, and the
// next step's draw for the same value agreeing in its top bit half of the time. (n = 65536: a
// fraction's standard deviation is 0.002, the bounds 0.01.)
TEST(HalfEmbeddingRounding, BitsAreUniformOverColumnsValuesAndSteps) {
  auto rng = ember::testing::make_rng();
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const std::uint64_t seed = kernels::rounding_seed(11);
  const std::uint64_t key = kernels::rounding_key(seed, 41), next = kernels::rounding_key(seed, 42);
  constexpr int kColumns = 128, kValues = 512, kN = kColumns * kValues;
  std::array<int, 24> ones{};
  double mean = 0;
  int same_top = 0;
  for (int c = 0; c < kColumns; ++c) {
    for (int k = 0; k < kValues; ++k) {
      const float before = value(rng);
      const std::uint32_t bits = kernels::rounding_bits(key, c, before);
      mean += static_cast<double>(bits) / (1u << 24) / kN;
      for (int b = 0; b < 24; ++b)
        ones[b] += (bits >> b) & 1u;
      same_top += (bits >> 23) == (kernels::rounding_bits(next, c, before) >> 23);
    }
  }
  EXPECT_NEAR(mean, 0.5, 0.01);
  for (int b = 0; b < 24; ++b)
    EXPECT_NEAR(static_cast<double>(ones[b]) / kN, 0.5, 0.01) << "bit " << b;
  EXPECT_NEAR(static_cast<double>(same_top) / kN, 0.5, 0.01);
}

// ---- the update step alone -------------------------------------------------------------------

constexpr optim::OptimizerType kOptimizers[] = {
    optim::OptimizerType::SGD, optim::OptimizerType::MomentumSGD, optim::OptimizerType::Nesterov,
    optim::OptimizerType::Adam, optim::OptimizerType::AdaGrad};

// kernels::update_rows on a 16-bit table equals, bit for bit, a plain loop: the chunk-ordered
// gradient sums, the optimizer step on the widened weight, and the rounding of the result.
template <class V>
void check_update_rows(ValueType type, Rounding rounding, std::mt19937_64& rng) {
  const std::int64_t V_ = 7;
  const std::vector<std::int64_t> lengths = {1, 2, 300, 5, 1, 513};
  const testing::UpdateBatch b = testing::random_update_batch(lengths, 3, 40, V_, rng);
  const std::int64_t n = static_cast<std::int64_t>(b.rows.size());
  std::vector<std::int32_t> sorted(n);
  std::vector<std::int64_t> unique(n), offsets(n + 1);
  std::int64_t count = 0;
  const auto& cpu = kernels::on(Place::host());
  cpu.segments(b.rows.data(), b.entry_bag.data(), n, b.rows_in_table, sorted.data(), unique.data(),
               offsets.data(), &count, nullptr);
  const std::vector<float> sums = testing::chunked_gradient_sums(b);
  for (optim::OptimizerType ot : kOptimizers) {
    const optim::OptimizerConfig o = testing::test_optimizer(ot, optim::UpdateType::Local);
    const std::int64_t step = 3;
    const optim::UpdateStep u = optim::make_update_step(o, 0.05f, step, 2.0f);
    std::vector<V> w(b.rows_in_table * V_);
    std::vector<float> s0(w.size(), o.initial_state(0)), s1(w.size(), o.initial_state(1));
    std::uniform_real_distribution<float> dist(-0.06f, 0.06f);
    for (auto& x : w)
      x = V(dist(rng));
    std::vector<V> want = w;
    std::vector<float> want_s0 = s0, want_s1 = s1;
    kernels::Values values{w.data(), type, rounding, kernels::rounding_seed(99)};
    const bool two = o.state_count() > 1, one = o.state_count() > 0;
    cpu.update_rows(
        kernels::Segments{sorted.data(), unique.data(), offsets.data(), &count, n}, b.scale.data(),
        b.grad.data(), ValueType::F32, values, V_,
        kernels::RowStates{one ? s0.data() : nullptr, two ? s1.data() : nullptr, nullptr}, step, u,
        nullptr, nullptr);
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(lengths.size()); ++r) {
      for (std::int64_t c = 0; c < V_; ++c) {
        const std::int64_t at = r * V_ + c;
        const float before = widen(want[at]);
        float x = before;
        float d0 = want_s0[at], d1 = want_s1[at];
        optim::apply_update(u, x, sums[at], d0, d1);
        want[at] = kernels::UpdateRounding<V>(values, step)(c, x, before);
        if (one) want_s0[at] = d0;
        if (two) want_s1[at] = d1;
      }
    }
    for (std::size_t i = 0; i < w.size(); ++i) {
      ASSERT_EQ(w[i].bits, want[i].bits) << optim::optimizer_name(ot) << " element " << i;
    }
    EXPECT_EQ(s0, want_s0) << optim::optimizer_name(ot);
    EXPECT_EQ(s1, want_s1) << optim::optimizer_name(ot);
  }
}

TEST(HalfEmbeddingKernels, UpdateRowsIsThePlainLoopWithRoundingBitwise) {
  auto rng = ember::testing::make_rng();
  for (Rounding rounding : {Rounding::Nearest, Rounding::Stochastic}) {
    check_update_rows<Half>(ValueType::F16, rounding, rng);
    check_update_rows<BFloat16>(ValueType::BF16, rounding, rng);
  }
}

TEST(HalfEmbeddingKernels, PoolWidensAndSumsInEntryOrder) {
  auto rng = ember::testing::make_rng();
  const std::int64_t V_ = 5, rows = 9;
  std::vector<Half> table(rows * V_);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : table)
    x = Half(dist(rng));
  const std::vector<std::int64_t> offsets = {0, 3, 3, 7}, entries = {4, -1, 8, 0, 0, 2, 7};
  const std::vector<float> scale = {1.0f, 0.0f, 0.25f};
  std::vector<float> out(3 * V_, -9.0f);
  kernels::on(Place::host())
      .pool(offsets.data(), entries.data(), scale.data(), 3, 7,
            kernels::Values{table.data(), ValueType::F16}, V_, out.data(), ValueType::F32, nullptr);
  for (std::int64_t bag = 0; bag < 3; ++bag) {
    for (std::int64_t c = 0; c < V_; ++c) {
      float want = 0.0f;
      for (std::int64_t e = offsets[bag]; e < offsets[bag + 1]; ++e) {
        if (entries[e] >= 0) want += widen(table[entries[e] * V_ + c]);
      }
      EXPECT_EQ(out[bag * V_ + c], want * scale[bag]) << bag << "," << c;
    }
  }
}

// ---- the layer -------------------------------------------------------------------------------

EmbeddingConfig half_config(EmbeddingType type, Combiner combiner, DType value_dtype,
                            std::uint64_t seed) {
  EmbeddingConfig c;
  c.name = "emb16";
  c.type = type;
  c.vec_size = 6;
  c.combiner = combiner;
  c.slot_num = static_cast<std::int64_t>(kSlotSizes.size());
  c.max_vocabulary_size_per_gpu = 200;
  if (type != EmbeddingType::DistributedSlotHash) c.slot_size_array = kSlotSizes;
  c.key_dtype = DType::I64;
  c.seed = seed;
  c.value_dtype = value_dtype;
  return c;
}

Problem make_problem(const EmbeddingConfig& c, const optim::OptimizerConfig& o, int steps,
                     std::int64_t batch, std::mt19937_64& rng) {
  Problem p;
  p.config = c;
  p.optimizer = o;
  for (int t = 0; t < steps; ++t) {
    p.batches.push_back(testing::random_batch(batch, kSlotSizes, 3, rng));
    p.grads.push_back(testing::random_grad(batch * c.slot_num * c.vec_size, rng));
    p.training.push_back(t != steps - 2);
  }
  p.loss_scaler = 4.0f;
  return p;
}

// Every stored value is a value of the 16-bit type.
void expect_representable(const std::vector<float>& v, DType t, const std::string& what) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float back = t == DType::F16 ? widen(Half(v[i])) : widen(BFloat16(v[i]));
    ASSERT_EQ(back, v[i]) << what << " element " << i;
  }
}

TEST(HalfEmbeddingLayer, EveryOptimizerAndUpdateTypeMatchesTheRoundingReference) {
  auto rng = ember::testing::make_rng();
  for (DType dt : {DType::F16, DType::BF16}) {
    // A 16-bit ulp is 2^-11 (f16) or 2^-8 (bf16) relative; the layer and the reference sum
    // gradients in different orders, so a rounding may fall on the other side now and then.
    const double tol = dt == DType::F16 ? 4e-3 : 3e-2;
    for (EmbeddingType type : {EmbeddingType::DistributedSlotHash, EmbeddingType::LocalizedSlotHash,
                               EmbeddingType::LocalizedSlotOneHot}) {
      for (optim::OptimizerType ot : kOptimizers) {
        for (optim::UpdateType ut :
             {optim::UpdateType::Local, optim::UpdateType::Global, optim::UpdateType::LazyGlobal}) {
          const Combiner comb = rng() % 2 ? Combiner::Sum : Combiner::Mean;
          const auto c = half_config(type, comb, dt, rng());
          const Problem p = make_problem(c, testing::test_optimizer(ot, ut), 4, 6, rng);
          const std::string what = std::string(name_of(dt)) + " " + embedding_type_name(type) +
                                   " " + optim::optimizer_name(ot) + " " +
                                   optim::update_type_name(ut);
          const auto want = testing::run_reference(p);
          for (int D : {1, 2}) {
            const auto got = testing::run_ranks(p, D);
            // LazyGlobal rounds once per catch-up where Global rounds every step.
            testing::expect_same_run(got, want, ut == optim::UpdateType::LazyGlobal ? 2 * tol : tol,
                                     what + " D=" + std::to_string(D));
            expect_representable(got.snapshot.vectors, dt, what);
          }
        }
      }
    }
  }
}

TEST(HalfEmbeddingLayer, Bf16AndF16ConfigValidation) {
  auto c = half_config(EmbeddingType::DistributedSlotHash, Combiner::Sum, DType::I32, 1);
  EMBER_EXPECT_THROW_WITH(c.validate(), ConfigError, "f32, f16 or bf16");
}

// Why stochastic rounding: SGD steps well under half an f16 ulp of the weights vanish under round
// to nearest, while stochastic rounding follows the f32 table on average.
TEST(HalfEmbeddingLayer, StochasticRoundingKeepsStepsThatNearestLoses) {
  auto rng = ember::testing::make_rng();
  const std::int64_t steps = 200, batch = 8;
  auto opt = testing::test_optimizer(optim::OptimizerType::SGD, optim::UpdateType::Local);
  opt.schedule.base_lr = 5e-7f;  // weights of 0.03 to 0.05 have an f16 ulp of 3e-5
  opt.schedule.warmup_steps = 1;
  auto base = half_config(EmbeddingType::LocalizedSlotOneHot, Combiner::Sum, DType::F32, rng());
  Problem p = make_problem(base, opt, 1, batch, rng);
  p.batches.assign(steps, p.batches[0]);
  p.grads.assign(steps, std::vector<float>(batch * base.slot_num * base.vec_size, 1.0f));
  p.training.assign(steps, true);
  p.loss_scaler = 1.0f;
  auto total = [](const testing::RunResult& r) {
    double sum = 0;
    for (float x : r.snapshot.vectors)
      sum += x;
    return sum;
  };
  // Each table's drift from where it starts (a zero-gradient run of the same batch).
  auto drift = [&](DType dt, bool stochastic) {
    Problem q = p;
    q.config.value_dtype = dt;
    q.config.stochastic_rounding = stochastic;
    const double moved = total(testing::run_ranks(q, 1));
    q.batches.resize(1);
    q.grads.assign(1, std::vector<float>(q.grads[0].size(), 0.0f));
    q.training.assign(1, true);
    return moved - total(testing::run_ranks(q, 1));
  };
  const double want = drift(DType::F32, true);
  const double nearest = drift(DType::F16, false), stochastic = drift(DType::F16, true);
  ASSERT_LT(want, -1e-3);                                       // the f32 table moved
  EXPECT_GT(std::abs(nearest - want), 0.5 * std::abs(want));    // nearest lost most of it
  EXPECT_LT(std::abs(stochastic - want), 0.1 * std::abs(want))  // stochastic kept it
      << "f32 " << want << ", nearest " << nearest << ", stochastic " << stochastic;
}

// ---- checkpoints -----------------------------------------------------------------------------

// Trains steps [first, first + steps) of p on one rank with `dtype` tables, optionally loading
// `load_dir` first and saving to `save_dir` after step `save_after` (default: the last); returns
// the snapshot after.
EmbeddingSnapshot train(const Problem& p, DType dtype, int first, int steps,
                        const std::filesystem::path& load_dir,
                        const std::filesystem::path& save_dir, EmbeddingSnapshot* loaded = nullptr,
                        int save_after = -1) {
  auto comms = distributed::make_in_process_communicators(1, 60.0);
  auto c = p.config;
  c.value_dtype = dtype;
  SparseEmbedding emb(c, p.optimizer, *comms[0]);
  if (!load_dir.empty()) emb.load(load_dir);
  if (loaded != nullptr) *loaded = emb.snapshot();
  const std::int64_t S = c.slot_num, V = c.vec_size;
  for (int t = first; t < first + steps; ++t) {
    const auto& h = p.batches[t];
    CsrTensor csr(Tensor::from_vector(h.offsets), Tensor::from_vector(h.keys),
                  static_cast<std::int64_t>(h.keys.size()));
    emb.forward(csr, 0, h.batch);
    emb.backward(Tensor::from_vector(p.grads[t], Shape{h.batch, S, V}));
    emb.update();
    if (t + 1 == save_after && !save_dir.empty()) emb.save(save_dir);
  }
  if (save_after < 0 && !save_dir.empty()) emb.save(save_dir);
  return emb.snapshot();
}

TEST(HalfEmbeddingCheckpoint, RoundTripAndLoadsBetweenF32And16BitTables) {
  auto rng = ember::testing::make_rng();
  ember::testing::ScratchDir scratch;
  for (DType dt : {DType::F16, DType::BF16}) {
    const auto c = half_config(EmbeddingType::DistributedSlotHash, Combiner::Sum, dt, rng());
    const Problem p = make_problem(
        c, testing::test_optimizer(optim::OptimizerType::Adam, optim::UpdateType::LazyGlobal), 4, 6,
        rng);
    const auto d16 = scratch / (std::string(name_of(dt)) + "_16"),
               d32 = scratch / (std::string(name_of(dt)) + "_32");
    // 16-bit -> save (files are f32) -> 16-bit: identical table, identical next step.
    const EmbeddingSnapshot saved16 = train(p, dt, 0, 3, {}, d16);
    EmbeddingSnapshot loaded;
    const EmbeddingSnapshot next_loaded = train(p, dt, 3, 1, d16, {}, &loaded);
    EXPECT_EQ(loaded.keys, saved16.keys);
    EXPECT_EQ(loaded.vectors, saved16.vectors);
    EXPECT_EQ(loaded.states, saved16.states);
    EXPECT_EQ(loaded.step, 3);
    // The saver going on (a save brings LazyGlobal rows up to date, which rounds them: the
    // run that never saved rounds them at other steps).
    const EmbeddingSnapshot continued =
        train(p, dt, 0, 4, {}, scratch / (std::string(name_of(dt)) + "_again"), nullptr, 3);
    EXPECT_EQ(next_loaded.vectors, continued.vectors) << name_of(dt);
    EXPECT_EQ(next_loaded.states, continued.states) << name_of(dt);
    // A 16-bit checkpoint into an f32 table: the values exactly.
    EmbeddingSnapshot as_f32;
    train(p, DType::F32, 3, 0, d16, {}, &as_f32);
    EXPECT_EQ(as_f32.vectors, saved16.vectors);
    EXPECT_EQ(as_f32.states, saved16.states);
    // An f32 checkpoint into a 16-bit table: each value rounded to nearest, states kept.
    const EmbeddingSnapshot saved32 = train(p, DType::F32, 0, 3, {}, d32);
    EmbeddingSnapshot as16;
    train(p, dt, 3, 0, d32, {}, &as16);
    ASSERT_EQ(as16.vectors.size(), saved32.vectors.size());
    for (std::size_t i = 0; i < as16.vectors.size(); ++i) {
      const float want =
          dt == DType::F16 ? widen(Half(saved32.vectors[i])) : widen(BFloat16(saved32.vectors[i]));
      ASSERT_EQ(as16.vectors[i], want) << i;
    }
    EXPECT_EQ(as16.states, saved32.states);
  }
}

}  // namespace
}  // namespace ember::embedding
