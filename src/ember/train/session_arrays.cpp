// Session's in-memory side, for callers that hold the data themselves (the Python module):
// prediction on samples given as arrays, and the model's weights read and written as arrays.
#include <algorithm>
#include <limits>

#include "ember/core/error.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/train/session_impl.hpp"

namespace ember::train {

namespace {

// Checks the arrays against the Data layer: one CSR per sparse input, offsets that start at 0,
// never go down and end at the key count, keys that the key type can hold.
void check_samples(const SampleArrays& a, const data::DataConfig& d, DType key_type) {
  const std::string where = cat("predict: ", a.rows, " samples");
  if (a.rows < 0) EMBER_THROW_AS(ConfigError, "predict: a negative sample count ", a.rows);
  const auto dense_values = a.rows * d.dense_dim;
  if (static_cast<std::int64_t>(a.dense.size()) != dense_values) {
    EMBER_THROW_AS(ConfigError, where, " of ", d.dense_dim, " dense features need ", dense_values,
                   " dense values, got ", a.dense.size());
  }
  if (a.sparse.size() != d.sparse.size()) {
    EMBER_THROW_AS(ConfigError, where, ": the model has ", d.sparse.size(),
                   " sparse input(s), got keys for ", a.sparse.size());
  }
  for (std::size_t i = 0; i < a.sparse.size(); ++i) {
    const auto& keys = a.sparse[i];
    const auto& input = d.sparse[i];
    const std::int64_t bags = a.rows * input.slot_num;
    const std::string in = cat(where, ", sparse input '", input.top, "'");
    if (static_cast<std::int64_t>(keys.row_offsets.size()) != bags + 1) {
      EMBER_THROW_AS(ConfigError, in, ": ", a.rows, " samples x ", input.slot_num, " slots need ",
                     bags + 1, " row offsets, got ", keys.row_offsets.size());
    }
    if (keys.row_offsets.front() != 0 ||
        keys.row_offsets.back() != static_cast<std::int64_t>(keys.keys.size())) {
      EMBER_THROW_AS(ConfigError, in, ": row offsets must run from 0 to the ", keys.keys.size(),
                     " keys, got ", keys.row_offsets.front(), " to ", keys.row_offsets.back());
    }
    for (std::int64_t b = 0; b < bags; ++b) {
      const auto n = keys.row_offsets[b + 1] - keys.row_offsets[b];
      if (n < 0) EMBER_THROW_AS(ConfigError, in, ": row offsets go down at bag ", b);
      if (input.max_nnz > 0 && n > input.max_nnz) {
        EMBER_THROW_AS(DataError, in, ": sample ", b / input.slot_num, " slot ", b % input.slot_num,
                       " has ", n, " keys, more than max_nnz ", input.max_nnz);
      }
    }
    if (input.max_feature_num_per_sample > 0) {
      for (std::int64_t r = 0; r < a.rows; ++r) {
        const auto n =
            keys.row_offsets[(r + 1) * input.slot_num] - keys.row_offsets[r * input.slot_num];
        if (n > input.max_feature_num_per_sample) {
          EMBER_THROW_AS(DataError, in, ": sample ", r, " has ", n,
                         " keys, more than max_feature_num_per_sample ",
                         input.max_feature_num_per_sample);
        }
      }
    }
    const std::int64_t most = key_type == DType::U32 ? std::numeric_limits<std::uint32_t>::max()
                                                     : std::numeric_limits<std::int64_t>::max();
    for (std::size_t k = 0; k < keys.keys.size(); ++k) {
      if (keys.keys[k] < 0 || keys.keys[k] > most) {
        EMBER_THROW_AS(DataError, in, ": key ", keys.keys[k], " (entry ", k, ") is outside 0..",
                       most, " (solver.input_key_type ", key_type == DType::U32 ? "I32" : "I64",
                       ")");
      }
    }
  }
}

// Samples [first, first + n) as rank `rank`'s DeviceBatch: its share of label (zeros) and dense,
// every sparse input's keys of all n samples.
data::DeviceBatch make_device_batch(const SampleArrays& a, const data::DataConfig& d,
                                    DType key_type, std::int64_t first, std::int64_t n, int rank,
                                    int ranks, Place place) {
  const std::vector<data::Share> shares = data::split_evenly(n, ranks);
  const data::Share share = shares[static_cast<std::size_t>(rank)];
  data::DeviceBatch b;
  b.global_size = n;
  b.local_offset = share.offset;
  b.local_size = share.size;
  b.place = place;
  b.label = Tensor::zeros({share.size, d.label_dim}, DType::F32, place);
  const auto dense_begin = a.dense.begin() + (first + share.offset) * d.dense_dim;
  b.dense =
      Tensor::from_vector(std::vector<float>(dense_begin, dense_begin + share.size * d.dense_dim),
                          {share.size, d.dense_dim}, place);
  for (std::size_t i = 0; i < a.sparse.size(); ++i) {
    const auto& keys = a.sparse[i];
    const std::int64_t slots = d.sparse[i].slot_num;
    const std::int64_t bag0 = first * slots, bags = n * slots;
    const std::int64_t key0 = keys.row_offsets[bag0];
    std::vector<std::int64_t> offsets(keys.row_offsets.begin() + bag0,
                                      keys.row_offsets.begin() + bag0 + bags + 1);
    for (auto& o : offsets)
      o -= key0;
    const std::int64_t nnz = offsets.back();
    const auto key_begin = keys.keys.begin() + key0;
    Tensor values;
    if (key_type == DType::U32) {
      values = Tensor::from_vector(std::vector<std::uint32_t>(key_begin, key_begin + nnz), place);
    } else {
      values = Tensor::from_vector(std::vector<std::int64_t>(key_begin, key_begin + nnz), place);
    }
    b.sparse.emplace_back(Tensor::from_vector(offsets, place), values, nnz);
  }
  return b;
}

}  // namespace

std::vector<double> Session::predict_samples(const SampleArrays& samples) {
  Impl& m = *impl_;
  const data::DataConfig& d = config_.data;
  const DType key_type = config_.solver.key_type;
  check_samples(samples, d, key_type);
  const Replica& r0 = *m.replicas.front();
  EvalAccumulator acc(r0.loss_kind(), r0.loss_target_weight());
  const int ranks = this->ranks();
  const std::int64_t chunk = config_.solver.batchsize_eval;
  std::vector<std::vector<float>> logits(m.places.size()), labels(m.places.size());
  for (std::int64_t first = 0; first < samples.rows; first += chunk) {
    const std::int64_t n = std::min(chunk, samples.rows - first);
    m.team->run([&](int r) {
      const auto i = static_cast<std::size_t>(r);
      const data::DeviceBatch batch =
          make_device_batch(samples, d, key_type, first, n, r, ranks, m.places[i]);
      logits[i].clear();
      labels[i].clear();
      m.replicas[i]->eval_step(batch, logits[i], labels[i]);
    });
    // Ranks hold consecutive shares of the samples: in rank order they are in sample order.
    std::vector<float> all_logits, all_labels;
    for (std::size_t i = 0; i < m.places.size(); ++i) {
      all_logits.insert(all_logits.end(), logits[i].begin(), logits[i].end());
      all_labels.insert(all_labels.end(), labels[i].begin(), labels[i].end());
    }
    acc.add(all_logits, all_labels, n);
  }
  return acc.scores();
}

embedding::EmbeddingSnapshot Session::embedding_snapshot(const std::string& name) {
  Impl& m = *impl_;
  std::size_t index = config_.embeddings.size();
  std::string names;
  for (std::size_t i = 0; i < config_.embeddings.size(); ++i) {
    if (config_.embeddings[i].name == name) index = i;
    names += (names.empty() ? "'" : ", '") + config_.embeddings[i].name + "'";
  }
  if (index == config_.embeddings.size()) {
    EMBER_THROW_AS(ConfigError, "the model has no embedding '", name, "' (it has ",
                   names.empty() ? std::string("none") : names, ")");
  }
  std::vector<embedding::EmbeddingSnapshot> parts(m.places.size());
  m.team->run([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    parts[i] = m.replicas[i]->embeddings()[index]->snapshot();
  });
  return std::move(parts.front());  // complete on rank 0
}

std::vector<DenseWeight> Session::dense_weights() const {
  const Impl& m = *impl_;
  std::vector<DenseWeight> out;
  for (const auto& p : m.replicas.front()->parameters().parameters()) {
    const Tensor& v = p->value();
    const Tensor host = (v.dtype() == DType::F32 ? v : ops::cast(v, DType::F32)).to(Place::host());
    out.push_back({p->name(), p->shape().to_vector(), p->trainable(), host.to_vector<float>()});
  }
  return out;
}

void Session::set_dense_weights(const std::vector<DenseWeight>& weights) {
  Impl& m = *impl_;
  const network::ParameterStore& store = m.replicas.front()->parameters();
  for (const DenseWeight& w : weights) {
    const network::ParameterPtr p = store.find(w.name);
    if (!p) {
      std::string names;
      for (const auto& q : store.parameters())
        names += (names.empty() ? "" : ", ") + q->name();
      EMBER_THROW_AS(ConfigError, "the model has no dense tensor '", w.name, "' (it has ", names,
                     ")");
    }
    if (w.shape != p->shape().to_vector() ||
        static_cast<std::int64_t>(w.values.size()) != p->numel()) {
      EMBER_THROW_AS(ConfigError, "dense tensor '", w.name, "' is ", p->shape().to_string(),
                     ", got ", Shape(w.shape).to_string(), " with ", w.values.size(), " values");
    }
  }
  m.team->run([&](int r) {
    network::ParameterStore& s = m.replicas[static_cast<std::size_t>(r)]->parameters();
    for (const DenseWeight& w : weights) {
      const Tensor& value = s.find(w.name)->value();
      const Tensor host = Tensor::from_vector(w.values, Shape(w.shape));
      value.copy_from(value.dtype() == DType::F32 ? host : ops::cast(host, value.dtype()));
    }
    s.sync_compute_copy();
  });
}

}  // namespace ember::train
