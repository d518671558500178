// The shape of one batch: label and dense widths, the key type, and per sparse input its slot
// count and key budget. Everything that sizes batch buffers derives from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ember/core/dtype.hpp"

namespace ember::data {

struct DataConfig;

struct SparseInputLayout {
  std::string name;
  std::int64_t slot_num = 0;
  // Most keys one sample may have over all slots of this input.
  std::int64_t max_feature_num_per_sample = 0;
  // Most keys in one slot (informative: HugeCTR's Norm reader does not enforce it).
  std::int64_t max_nnz = 0;
  // is_fixed_length: the key count of every slot, which every sample must have (empty: any
  // count within the budget).
  std::vector<std::int64_t> fixed_nnz = {};
};

// Shared reading (key_exchange.hpp): the keys a row gets room for when another process parses
// it, so that where the guess holds every key lands where the whole batch's CSR has it and the
// exchange rewrites no offsets and moves none of this process's keys. The fixed count of a
// fixed-length input whose slots all have the same; else one key a slot (one-hot, the common
// CTR case) where the per-sample budget has room for it; else none.
std::int64_t keys_reserved_per_row(const SparseInputLayout& input);

struct BatchLayout {
  std::int64_t label_dim = 1;
  std::int64_t dense_dim = 0;
  // U32 (HugeCTR's I32, the default) or I64.
  DType key_type = DType::U32;
  std::vector<SparseInputLayout> sparse;

  std::int64_t total_slots() const;
  std::size_t key_size() const { return dtype_size(key_type); }
  // Bytes of label and dense of one sample (float32 each).
  std::size_t label_dense_bytes() const {
    return static_cast<std::size_t>(label_dim + dense_dim) * sizeof(float);
  }
  // Throws ConfigError unless the dims are sane and the key type is U32 or I64.
  void validate(std::string_view what) const;

  static BatchLayout from_config(const DataConfig& config, DType key_type);
};

// "I32"/"u32"/"uint32" -> U32, "I64"/"i64"/"int64" -> I64 (HugeCTR's input_key_type and the
// command line's spelling); anything else is a ConfigError naming `what`.
DType parse_key_type(std::string_view text, std::string_view what);
// "u32" or "i64".
std::string_view key_type_name(DType key_type);

// Byte offsets of the buffers of one batch inside a single allocation: label rows, dense rows,
// then per sparse input its CSR row offsets (i64, rows = samples x slot_num, plus one) and its
// key values. Each buffer starts on a 256-byte boundary.
struct BatchBufferPlan {
  BatchBufferPlan(const BatchLayout& layout, std::int64_t label_rows, std::int64_t samples);

  std::int64_t label_rows = 0;  // rows of label and dense
  std::int64_t samples = 0;     // samples the CSRs hold
  std::size_t label = 0, dense = 0;
  std::vector<std::size_t> row_offsets, values;
  std::vector<std::int64_t> value_capacity;  // keys each input's value buffer holds
  std::size_t total_bytes = 0;
};

}  // namespace ember::data
