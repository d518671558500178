// ColumnCursor's value side: definition-level checks, PLAIN and dictionary values converted to
// floats or keys, list columns.
// (Page handling is in column_cursor.cpp.)
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ember/core/error.hpp"
#include "ember/data/parquet/column_cursor.hpp"
#include "ember/data/parquet/column_cursor_detail.hpp"

namespace ember::data::parquet {

namespace {
using detail::kChunk;
using detail::load;
using detail::value_width;
// n PLAIN values of type Raw from p to floats at out[0], out[stride], ...
template <class Raw>
void plain_to_floats(const std::byte* p, float* out, std::ptrdiff_t stride, std::size_t n) {
  constexpr std::size_t kPerLine = 64 / sizeof(Raw);
  for (std::size_t i0 = 0; i0 < n; i0 += kPerLine) {
    detail::prefetch_ahead(p + sizeof(Raw) * i0);
    const std::size_t end = std::min(n, i0 + kPerLine);
    for (std::size_t i = i0; i < end; ++i) {
      out[static_cast<std::ptrdiff_t>(i) * stride] =
          static_cast<float>(load<Raw>(p + sizeof(Raw) * i));
    }
  }
}

}  // namespace

void ColumnCursor::check_no_nulls(std::int64_t n) {
  if (max_def_ == 0) return;
  const std::size_t ok =
      def_.consume_equal(static_cast<std::uint32_t>(max_def_), static_cast<std::size_t>(n));
  if (ok < static_cast<std::size_t>(n)) {
    if (def_.mismatch()) fail_null(row_ + static_cast<std::int64_t>(ok));
    fail(cat("page ", page_index_ - 1, ": definition levels end after row ",
             row_ + static_cast<std::int64_t>(ok)));
  }
}

void ColumnCursor::next_indices(std::uint32_t* idx, std::size_t n, std::size_t dict_size) {
  if (indices_.get(idx, n) != n) {
    fail(cat("page ", page_index_ - 1, " holds fewer dictionary indices than values"));
  }
  // One pass that vectorises (an OR of comparisons; a running maximum of unsigned values does
  // not, before SSE4.1); the worst index is looked for only for the message.
  const auto size = static_cast<std::uint32_t>(std::min<std::size_t>(dict_size, 0xffffffffu));
  std::uint32_t past = 0;
  for (std::size_t i = 0; i < n; ++i)
    past |= static_cast<std::uint32_t>(idx[i] >= size);
  if (past != 0) [[unlikely]] {
    const std::uint32_t worst = *std::max_element(idx, idx + n);
    fail(cat("page ", page_index_ - 1, ": dictionary index ", worst, " past the dictionary's ",
             dict_size, " entries"));
  }
}

void ColumnCursor::decode_raw_ints(std::int64_t* out, std::size_t n) {
  if (values_ == Values::Dictionary) {
    index_scratch_.resize(std::max(index_scratch_.size(), std::min(n, kChunk)));
    const auto dict_size = static_cast<std::uint32_t>(dict_ints_.size());
    for (std::size_t done = 0; done < n;) {
      const std::size_t m = std::min(n - done, kChunk);
      next_indices(index_scratch_.data(), m, dict_size);
      for (std::size_t i = 0; i < m; ++i)
        out[done + i] = dict_ints_[index_scratch_[i]];
      done += m;
    }
    return;
  }
  if (n == 0) return;  // a page of empty lists: no values, maybe no buffer
  const std::size_t width = value_width(type_);
  if (n * width > plain_left_) {
    fail(cat("page ", page_index_ - 1, " holds ", plain_left_ / width,
             " values fewer than its header claims"));
  }
  if (type_ == PhysicalType::Int64) {
    std::memcpy(out, plain_, n * 8);
  } else if (binding_->is_unsigned) {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = load<std::uint32_t>(plain_ + 4 * i);
  } else {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = load<std::int32_t>(plain_ + 4 * i);
  }
  plain_ += n * width;
  plain_left_ -= n * width;
}

void ColumnCursor::decode_floats(float* out, std::ptrdiff_t stride, std::size_t n) {
  if (values_ == Values::Dictionary) {
    index_scratch_.resize(std::max(index_scratch_.size(), std::min(n, kChunk)));
    const auto dict_size = static_cast<std::uint32_t>(dict_floats_.size());
    for (std::size_t done = 0; done < n;) {
      const std::size_t m = std::min(n - done, kChunk);
      next_indices(index_scratch_.data(), m, dict_size);
      float* o = out + static_cast<std::ptrdiff_t>(done) * stride;
      for (std::size_t i = 0; i < m; ++i)
        o[static_cast<std::ptrdiff_t>(i) * stride] = dict_floats_[index_scratch_[i]];
      done += m;
    }
    return;
  }
  const std::size_t width = value_width(type_);
  if (n * width > plain_left_) {
    fail(cat("page ", page_index_ - 1, " holds ", plain_left_ / width,
             " values, fewer than its header claims"));
  }
  const bool u = binding_->is_unsigned;
  switch (type_) {
    case PhysicalType::Float:
      plain_to_floats<float>(plain_, out, stride, n);
      break;
    case PhysicalType::Double:
      plain_to_floats<double>(plain_, out, stride, n);
      break;
    case PhysicalType::Int32:
      u ? plain_to_floats<std::uint32_t>(plain_, out, stride, n)
        : plain_to_floats<std::int32_t>(plain_, out, stride, n);
      break;
    default:
      u ? plain_to_floats<std::uint64_t>(plain_, out, stride, n)
        : plain_to_floats<std::int64_t>(plain_, out, stride, n);
  }
  plain_ += n * width;
  plain_left_ -= n * width;
}

void ColumnCursor::skip_values(std::int64_t n) {
  const auto m = static_cast<std::size_t>(n);
  if (max_def_ > 0 && def_.skip(m) != m) {
    fail(cat("page ", page_index_ - 1, ": definition levels end before row ", row_ + n));
  }
  if (values_ == Values::Dictionary) {
    if (indices_.skip(m) != m) {
      fail(cat("page ", page_index_ - 1, " holds fewer dictionary indices than values"));
    }
    return;
  }
  const std::size_t width = value_width(type_);
  if (m * width > plain_left_) {
    fail(cat("page ", page_index_ - 1, " holds ", plain_left_ / width,
             " values, fewer than its header claims"));
  }
  plain_ += m * width;
  plain_left_ -= m * width;
}

void ColumnCursor::settle_skip() {
  std::int64_t n = pending_skip_;
  if (n == 0) return;
  pending_skip_ = 0;
  if (binding_->shape == FieldShape::List) {
    std::vector<std::int64_t> none;
    read_key_lists(n, nullptr, none, KeyRange{});
    return;
  }
  while (n > 0) {
    if (page_left_ == 0) {
      std::int64_t passed = 0;
      const bool opened = next_page(n, passed);
      row_ += passed;
      n -= passed;
      if (!opened) {
        if (n > 0) fail_short();
        return;
      }
      continue;
    }
    const std::int64_t m = std::min(n, page_left_);
    skip_values(m);
    n -= m;
    page_left_ -= m;
    row_ += m;
  }
}

void ColumnCursor::read_floats(float* dst, std::ptrdiff_t stride, std::int64_t n) {
  settle_skip();
  while (n > 0) {
    if (page_left_ == 0 && !next_page()) fail_short();
    const std::int64_t m = std::min(n, page_left_);
    check_no_nulls(m);
    decode_floats(dst, stride, static_cast<std::size_t>(m));
    dst += m * stride;
    n -= m;
    page_left_ -= m;
    row_ += m;
  }
}

template <class Key>
const Key* ColumnCursor::keyed_dictionary(const KeyRange& range) {
  constexpr bool u32 = std::is_same_v<Key, std::uint32_t>;
  if (keyed_generation_ != dictionary_generation_ || keyed_min_ != range.min ||
      keyed_max_ != range.max || keyed_offset_ != range.offset || keyed_u32_ != u32) {
    keyed_generation_ = dictionary_generation_;
    keyed_min_ = range.min;
    keyed_max_ = range.max;
    keyed_offset_ = range.offset;
    keyed_u32_ = u32;
    keyed_valid_ = true;
    auto& table = [&]() -> std::vector<Key>& {
      if constexpr (u32)
        return dict_u32_;
      else
        return dict_i64_;
    }();
    table.resize(dict_ints_.size());
    for (std::size_t i = 0; i < dict_ints_.size(); ++i) {
      const std::int64_t v = dict_ints_[i];
      keyed_valid_ &= v >= range.min && v <= range.max;
      table[i] = static_cast<Key>(v + range.offset);
    }
  }
  if (!keyed_valid_) return nullptr;  // the slow path finds the row of the bad key
  if constexpr (u32)
    return dict_u32_.data();
  else
    return dict_i64_.data();
}

// The common cases without a scratch copy: dictionary indices straight to keys (the dictionary
// already checked and offset), and PLAIN INT64 / INT32 values checked as they are stored. False
// when neither applies.
template <class Key>
bool ColumnCursor::read_keys_fast(Key* dst, std::ptrdiff_t stride, std::int64_t m,
                                  const KeyRange& range) {
  if (values_ == Values::Dictionary) {
    const Key* table = keyed_dictionary<Key>(range);
    if (table == nullptr) return false;
    index_scratch_.resize(std::max<std::size_t>(index_scratch_.size(), kChunk));
    std::uint32_t* idx = index_scratch_.data();
    next_indices(idx, static_cast<std::size_t>(m), dict_ints_.size());
    for (std::int64_t i = 0; i < m; ++i)
      dst[i * stride] = table[idx[i]];
    return true;
  }
  const std::size_t width = value_width(type_);
  if ((type_ != PhysicalType::Int64 && type_ != PhysicalType::Int32) ||
      static_cast<std::size_t>(m) * width > plain_left_) {
    return false;
  }
  // One loop per stored type; each value checked and stored in the same pass.
  const auto convert = [&](auto raw_type) {
    using Raw = decltype(raw_type);
    const std::int64_t lo = range.min, hi = range.max, offset = range.offset;
    const auto span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    bool bad = false;
    constexpr std::int64_t kPerLine = 64 / sizeof(Raw);
    for (std::int64_t i0 = 0; i0 < m; i0 += kPerLine) {
      detail::prefetch_ahead(plain_ + sizeof(Raw) * i0);
      const std::int64_t end = std::min(m, i0 + kPerLine);
      for (std::int64_t i = i0; i < end; ++i) {
        const auto v = static_cast<std::int64_t>(load<Raw>(plain_ + sizeof(Raw) * i));
        bad |= static_cast<std::uint64_t>(v) - static_cast<std::uint64_t>(lo) > span;
        dst[i * stride] = static_cast<Key>(v + offset);
      }
    }
    if (bad) [[unlikely]] {
      for (std::int64_t i = 0; i < m; ++i) {
        const auto v = static_cast<std::int64_t>(load<Raw>(plain_ + sizeof(Raw) * i));
        if (v < lo || v > hi) fail_key(row_ + i, v, range);
      }
    }
  };
  if (type_ == PhysicalType::Int64) {
    convert(std::int64_t{});
  } else if (binding_->is_unsigned) {
    convert(std::uint32_t{});
  } else {
    convert(std::int32_t{});
  }
  plain_ += width * static_cast<std::size_t>(m);
  plain_left_ -= width * static_cast<std::size_t>(m);
  return true;
}

template <class Key>
void ColumnCursor::read_keys(Key* dst, std::ptrdiff_t stride, std::int64_t n,
                             const KeyRange& range) {
  settle_skip();
  raw_scratch_.resize(kChunk);
  while (n > 0) {
    if (page_left_ == 0 && !next_page()) fail_short();
    const std::int64_t m = std::min({n, page_left_, static_cast<std::int64_t>(kChunk)});
    check_no_nulls(m);
    if (read_keys_fast(dst, stride, m, range)) {
      dst += m * stride;
      n -= m;
      page_left_ -= m;
      row_ += m;
      continue;
    }
    std::int64_t* raw = raw_scratch_.data();
    decode_raw_ints(raw, static_cast<std::size_t>(m));
    // One comparison pair per key, no branch; the row is looked for only when one fails.
    const std::int64_t lo = range.min, hi = range.max, offset = range.offset;
    bool bad = false;
    for (std::int64_t i = 0; i < m; ++i) {
      const std::int64_t v = raw[i];
      bad |= (v < lo) | (v > hi);
      dst[i * stride] = static_cast<Key>(v + offset);
    }
    if (bad) [[unlikely]] {
      for (std::int64_t i = 0; i < m; ++i) {
        if (raw[i] < lo || raw[i] > hi) fail_key(row_ + i, raw[i], range);
      }
    }
    dst += m * stride;
    n -= m;
    page_left_ -= m;
    row_ += m;
  }
}

template void ColumnCursor::read_keys<std::uint32_t>(std::uint32_t*, std::ptrdiff_t, std::int64_t,
                                                     const KeyRange&);
template void ColumnCursor::read_keys<std::int64_t>(std::int64_t*, std::ptrdiff_t, std::int64_t,
                                                    const KeyRange&);

void ColumnCursor::read_key_lists(std::int64_t n, std::int32_t* counts,
                                  std::vector<std::int64_t>& keys, const KeyRange& range) {
  if (binding_->shape != FieldShape::List) {
    std::fill(counts, counts + n, 1);
    const std::size_t at = keys.size();
    keys.resize(at + static_cast<std::size_t>(n));
    read_keys<std::int64_t>(keys.data() + at, 1, n, range);
    return;
  }
  const bool store = counts != nullptr;  // else passing over (settle_skip)
  if (store) settle_skip();
  std::int64_t done = 0;
  const auto empty = static_cast<std::uint8_t>(binding_->empty_list_definition);
  const auto present = static_cast<std::uint8_t>(max_def_);
  for (;;) {
    if (page_left_ == 0) {
      if (!next_page()) {
        if (row_open_) {
          row_open_ = false;
          ++done;
          ++row_;
        }
        if (done < n) fail_short();
        return;
      }
      continue;
    }
    const std::uint8_t rep = rep_levels_[level_at_];
    const std::uint8_t def = def_levels_[level_at_];
    if (rep == 0) {
      if (row_open_) {
        row_open_ = false;
        ++done;
        ++row_;
      }
      if (done == n) return;  // the entry starts the next call's first row
      row_open_ = true;
      if (store) counts[done] = 0;
    } else if (!row_open_) {
      fail(cat("row ", row_, " starts with repetition level ", int{rep}, " instead of 0"));
    }
    if (def == present && !store) {
      ++list_value_at_;
    } else if (def == present) {
      const std::int64_t v = list_values_[list_value_at_++];
      if (v < range.min || v > range.max) fail_key(row_, v, range);
      keys.push_back(v + range.offset);
      ++counts[done];
    } else if (!(def == empty && rep == 0)) {
      fail_null(row_);
    }
    ++level_at_;
    --page_left_;
  }
}

}  // namespace ember::data::parquet
