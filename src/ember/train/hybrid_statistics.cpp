#include "ember/train/hybrid_statistics.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/data/data_source.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/embedding/hybrid_frequent.hpp"

namespace ember::train {

namespace {

// One hybrid layer's share of the pass: the keys counted so far.
struct Counting {
  embedding::EmbeddingConfig* layer = nullptr;
  int input = 0;             // the Data layer's sparse input it reads
  std::int64_t samples = 0;  // samples to count (num_iterations_statistics x batchsize)
  std::int64_t counted = 0;
  std::vector<std::int64_t> keys;
};

template <class Key>
void take_keys(const data::HostBatch& batch, Counting& c, std::int64_t vocabulary) {
  const std::int64_t n = std::min(batch.size(), c.samples - c.counted);
  if (n <= 0) return;
  const std::int64_t slots = c.layer->slot_num;
  const std::int64_t end = batch.row_offsets(c.input)[n * slots];
  const Key* keys = batch.values_as<Key>(c.input);
  for (std::int64_t e = 0; e < end; ++e) {
    const auto key = static_cast<std::int64_t>(keys[e]);
    // A key outside the vocabulary is the training's error to report, with its sample.
    if (key >= 0 && key < vocabulary) c.keys.push_back(key);
  }
  c.counted += n;
}

}  // namespace

void choose_hybrid_frequent_categories(ModelConfig& config, int ranks, int processes,
                                       bool half_activations) {
  const SolverConfig& s = config.solver;
  std::vector<Counting> layers;
  std::int64_t wanted = 0;
  for (auto& e : config.embeddings) {
    if (e.type != embedding::EmbeddingType::Hybrid) continue;
    Counting c;
    c.layer = &e;
    const auto input = std::find_if(config.data.sparse.begin(), config.data.sparse.end(),
                                    [&](const auto& in) { return in.top == e.bottom; });
    EMBER_CHECK(input != config.data.sparse.end(), e.where(), ": no sparse input '", e.bottom,
                "' in the Data layer");
    c.input = static_cast<int>(input - config.data.sparse.begin());
    const std::int64_t batches = e.hybrid.num_iterations_statistics >= 0
                                     ? e.hybrid.num_iterations_statistics
                                     : s.num_iterations_statistics;
    c.samples = batches * s.batchsize;
    wanted = std::max(wanted, c.samples);
    layers.push_back(std::move(c));
  }
  if (layers.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  if (wanted > 0) {
    const auto source =
        data::make_data_source(config.data, s.key_type, data::DataSplit::Train, s.seed);
    data::ReadCounters counters;
    data::ShardSpec spec;
    spec.batch_size = s.batchsize;
    spec.counters = &counters;
    const auto reader = source->open_shard(spec);
    data::HostBatch batch(source->layout(), s.batchsize);
    for (std::int64_t read = 0; read < wanted;) {
      batch.clear();
      if (reader->fill(batch) == 0) break;  // a training set shorter than the pass: all of it
      for (Counting& c : layers) {
        const std::int64_t vocabulary = c.layer->vocabulary();
        if (s.key_type == DType::U32) {
          take_keys<std::uint32_t>(batch, c, vocabulary);
        } else {
          take_keys<std::int64_t>(batch, c, vocabulary);
        }
      }
      read += batch.size();
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (Counting& c : layers) {
    embedding::FrequentChoiceInputs in;
    in.batch_size = s.batchsize;
    in.batch_size_eval = s.batchsize_eval;
    in.batches = static_cast<double>(c.counted) / static_cast<double>(s.batchsize);
    in.ranks = ranks;
    in.processes = processes;
    // The exchanged vectors' element (SparseEmbedding::exchange_dtype): the network's 16-bit
    // activations, f32 otherwise or for an odd 16-bit width.
    in.exchange_bytes = half_activations && c.layer->vec_size % 2 == 0 ? 2 : 4;
    const embedding::FrequentChoice choice =
        embedding::choose_frequent_categories(c.keys, c.layer->hybrid, in);
    c.layer->hybrid.frequent_keys = choice.keys;
    EMBER_LOG_INFO("{}: {} from {} training samples ({:.2f} s)", c.layer->where(),
                   choice.describe(c.layer->hybrid), c.counted, seconds);
  }
}

}  // namespace ember::train
