// CPU implementations of the embedding steps (the reference the CUDA ones are tested against).
// Parallel over bags / rows with OpenMP. Pooling sums in entry order and gradient sums in the
// kGradientChunk order, like the CUDA kernels, so the gradient sums agree bitwise.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/embedding/embedding_kernels.hpp"

namespace ember::embedding::kernels::cpu {

namespace {

template <class Key>
std::int64_t select_local(const SelectArgs& a, const Key* keys, std::int64_t* local_offsets,
                          Key* local_keys, std::int64_t* entry_bag, float* scale, StreamHandle) {
  const std::int64_t bags = a.bags();
  local_offsets[0] = 0;
#pragma omp parallel for schedule(static) if (bags >= 16384)
  for (std::int64_t bag = 0; bag < bags; ++bag) {
    const std::int64_t g = a.global_row(bag);
    std::int64_t count = 0;
    for (std::int64_t e = a.offsets[g]; e < a.offsets[g + 1]; ++e)
      count += a.owns(keys[e]);
    local_offsets[bag + 1] = count;
    const std::int64_t nnz = a.offsets[g + 1] - a.offsets[g];
    scale[bag] = !a.mean ? 1.0f : (nnz == 0 ? 0.0f : 1.0f / static_cast<float>(nnz));
  }
  for (std::int64_t bag = 0; bag < bags; ++bag)
    local_offsets[bag + 1] += local_offsets[bag];
#pragma omp parallel for schedule(static) if (bags >= 16384)
  for (std::int64_t bag = 0; bag < bags; ++bag) {
    const std::int64_t g = a.global_row(bag);
    std::int64_t out = local_offsets[bag];
    for (std::int64_t e = a.offsets[g]; e < a.offsets[g + 1]; ++e) {
      if (a.owns(keys[e])) {
        local_keys[out] = keys[e];
        entry_bag[out] = bag;
        ++out;
      }
    }
  }
  return local_offsets[bags];
}

template <class Key>
void onehot_rows(const OneHotArgs& a, const Key* keys, const std::int64_t* entry_bag,
                 std::int64_t n, std::int64_t* rows, std::int64_t* bad, StreamHandle) {
  bad[0] = -1;
  for (std::int64_t e = 0; e < n; ++e) {
    const std::int64_t j = entry_bag[e] % a.owned_count;
    const auto key = static_cast<std::int64_t>(keys[e]);
    const bool second = a.one_key_per_bag && e > 0 && entry_bag[e] == entry_bag[e - 1];
    if (key < a.begin[j] || key >= a.begin[j] + a.size[j] || second) {
      rows[e] = -1;
      if (bad[0] < 0) {
        bad[0] = e;
        bad[1] = key;
        bad[2] = entry_bag[e];
      }
      continue;
    }
    rows[e] = a.local_base[j] + (key - a.begin[j]);
  }
}

template <class Key>
void hybrid_rows(const HybridArgs& a, const Key* keys, const HybridRows& out, StreamHandle) {
  const std::int64_t S = a.slot_num, bags = a.batch * S;
  const std::int64_t local_first = a.local_offset * S;
  const std::int64_t local_end = (a.local_offset + a.local_size) * S;
  std::int64_t first_bad = bags;
#pragma omp parallel for schedule(static) reduction(min : first_bad) if (bags >= 16384)
  for (std::int64_t g = 0; g < bags; ++g) {
    const std::int64_t b = g / S, s = g % S;
    const std::int64_t begin = a.offsets[g], n = a.offsets[g + 1] - begin;
    const std::int64_t key = n > 0 ? static_cast<std::int64_t>(keys[begin]) : -1;
    const bool inside = n == 1 && key >= a.slot_begin[s] && key < a.slot_begin[s + 1];
    if (n > 1 || (n == 1 && !inside)) first_bad = std::min(first_bad, g);
    const std::int64_t f = n == 1 && a.frequent != nullptr ? a.frequent[begin] : -1;
    const bool frequent = f >= 0 && inside, infrequent = n == 1 && f < 0;
    if (frequent && out.used != nullptr) std::atomic_ref<std::int32_t>(out.used[f]).store(1);
    if (g >= local_first && g < local_end) {
      const std::int64_t l = g - local_first;
      out.frequent_rows[l] = frequent ? f : -1;
      out.expect[l] = infrequent ? 1 : 0;
      if (frequent && out.local_used != nullptr) {
        std::atomic_ref<std::int32_t>(out.local_used[f]).store(1);
      }
    }
    if (s % a.ranks == a.rank) {
      out.owned_rows[b * a.owned_count + s / a.ranks] =
          !infrequent ? -2
          : inside    ? a.local_base[s] + (key - a.slot_begin[s])
                      : -1;
    }
  }
  out.bad[0] = -1;
  if (first_bad < bags) {
    const std::int64_t begin = a.offsets[first_bad];
    out.bad[0] = first_bad;
    out.bad[1] = static_cast<std::int64_t>(keys[begin]);
    out.bad[2] = a.offsets[first_bad + 1] - begin;
  }
}

// Row r of a table's vectors as V.
template <class V>
V* value_row(const Values& v, std::int64_t r, std::int64_t vec_size) {
  return static_cast<V*>(v.data) + r * vec_size;
}

template <class V, class Key>
void init_row(V* row, std::int64_t vec_size, Key key, std::uint64_t seed, float bound) {
  const std::uint64_t stream = row_init_stream(seed, static_cast<std::uint64_t>(key));
  for (std::int64_t c = 0; c < vec_size; ++c)
    row[c] = V(initial_value_at(stream, c, bound));
}

template <class Key>
void init_rows(const Values& values, std::int64_t vec_size, std::int64_t first, std::int64_t end,
               const Key* keys_by_row, std::uint64_t seed, float bound, StreamHandle) {
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
#pragma omp parallel for schedule(static) if (end - first >= 1024)
    for (std::int64_t r = first; r < end; ++r)
      init_row(value_row<V>(values, r, vec_size), vec_size, keys_by_row[r], seed, bound);
  });
}

template <class Key>
void init_new_rows(const NewRows& fresh, const Key* keys_by_row, const RowInit& init,
                   const Values& values, std::int64_t vec_size, RowStates st, StreamHandle) {
  const std::int64_t first = fresh.range[0], end = fresh.range[1];
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
#pragma omp parallel for schedule(static) if (end - first >= 1024)
    for (std::int64_t r = first; r < end; ++r) {
      init_row(value_row<V>(values, r, vec_size), vec_size, keys_by_row[r], init.seed, init.bound);
      if (st.s0 != nullptr)
        std::fill(st.s0 + r * vec_size, st.s0 + (r + 1) * vec_size, init.state0);
      if (st.s1 != nullptr)
        std::fill(st.s1 + r * vec_size, st.s1 + (r + 1) * vec_size, init.state1);
      if (st.last_step != nullptr) st.last_step[r] = init.step;
    }
  });
}

// One optimizer step on a row; s0/s1 may be null (unused by the optimizer). The weight is
// stepped in f32 and rounded once into V.
template <class V>
void step_row(const Values& v, const optim::UpdateStep& u, V* w, const float* g, float* s0,
              float* s1, std::int64_t vec_size, std::int64_t step) {
  float dummy0 = 0, dummy1 = 0;
  const UpdateRounding<V> rounder(v, step);
  for (std::int64_t c = 0; c < vec_size; ++c) {
    const float before = static_cast<float>(w[c]);
    float x = before;
    optim::apply_update(u, x, g == nullptr ? 0.0f : g[c], s0 ? s0[c] : dummy0, s1 ? s1[c] : dummy1);
    w[c] = rounder(c, x, before);
  }
}

template <class Key>
void init_rows_at(const std::int64_t* rows, const std::int64_t* slots, std::int64_t count,
                  const Key* keys_by_row, const RowInit& init, float* values, std::int64_t vec_size,
                  RowStates st, StreamHandle) {
#pragma omp parallel for schedule(static) if (count >= 1024)
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t at = slots[i] * vec_size;
    init_row(values + at, vec_size, keys_by_row[rows[i]], init.seed, init.bound);
    if (st.s0 != nullptr) std::fill(st.s0 + at, st.s0 + at + vec_size, init.state0);
    if (st.s1 != nullptr) std::fill(st.s1 + at, st.s1 + at + vec_size, init.state1);
    if (st.last_step != nullptr) st.last_step[slots[i]] = init.step;
  }
}

template <class V>
void catch_up_row(const Values& v, const LazyParams& lazy, V* w, float* s0, float* s1,
                  std::int64_t vec_size, std::int64_t from, std::int64_t to) {
  float dummy0 = 0, dummy1 = 0;
  const UpdateRounding<V> rounder(v, to);
  for (std::int64_t c = 0; c < vec_size; ++c) {
    const float before = static_cast<float>(w[c]);
    float x = before;
    catch_up(lazy, x, s0 ? s0[c] : dummy0, s1 ? s1[c] : dummy1, from, to);
    w[c] = rounder(c, x, before);
  }
}

float* row_of(float* base, std::int64_t row, std::int64_t vec_size) {
  return base == nullptr ? nullptr : base + row * vec_size;
}

void pool(const std::int64_t* local_offsets, const std::int64_t* rows, const float* scale,
          std::int64_t bags, std::int64_t /*entries: picks a CUDA kernel*/, const Values& values,
          std::int64_t vec_size, void* out, ValueType out_type, StreamHandle) {
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    with_value_type(out_type, [&](auto out_tag) {
      using O = decltype(out_tag);
      const V* table = static_cast<const V*>(values.data);
#pragma omp parallel if (bags * vec_size >= 65536)
      {
        std::vector<float> acc(vec_size);
#pragma omp for schedule(static)
        for (std::int64_t bag = 0; bag < bags; ++bag) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          const std::int64_t begin = local_offsets == nullptr ? bag : local_offsets[bag];
          const std::int64_t end = local_offsets == nullptr ? bag + 1 : local_offsets[bag + 1];
          for (std::int64_t e = begin; e < end; ++e) {
            if (rows[e] < 0) continue;
            const V* v = table + rows[e] * vec_size;
            for (std::int64_t c = 0; c < vec_size; ++c)
              acc[c] += static_cast<float>(v[c]);
          }
          const float s = scale == nullptr ? 1.0f : scale[bag];
          O* o = static_cast<O*>(out) + bag * vec_size;
          for (std::int64_t c = 0; c < vec_size; ++c)
            o[c] = O(acc[c] * s);
        }
      }
    });
  });
}

void gather_codes(const std::int64_t* local_offsets, const std::int64_t* rows, const float* scale,
                  std::int64_t bags, const Values& values, std::int64_t vec_size,
                  std::int32_t* codes, void* out, ValueType out_type, StreamHandle stream) {
  std::vector<std::int64_t> pooled;
  for (std::int64_t bag = 0; bag < bags; ++bag) {
    // The CUDA kernel's order of cases, so that both write the same codes.
    const std::int64_t begin = local_offsets[bag], end = local_offsets[bag + 1];
    if (end - begin == 1 && (scale == nullptr || scale[bag] == 1.0f)) {
      codes[bag] = rows[begin] >= 0 ? static_cast<std::int32_t>(rows[begin]) : kGatherZeroRow;
    } else if (end == begin) {
      codes[bag] = kGatherZeroRow;
    } else {
      codes[bag] = gather_dense_code(bag);
      pooled.push_back(bag);
    }
  }
  if (pooled.empty()) return;
  // Each pooled bag as pool() pools it: one bag without offsets is that bag's own entry range.
  const std::size_t row_bytes =
      static_cast<std::size_t>(value_bytes(out_type)) * static_cast<std::size_t>(vec_size);
  for (const std::int64_t bag : pooled) {
    const std::int64_t range[2] = {local_offsets[bag], local_offsets[bag + 1]};
    pool(range, rows, scale == nullptr ? nullptr : scale + bag, 1, range[1] - range[0], values,
         vec_size, static_cast<unsigned char*>(out) + static_cast<std::size_t>(bag) * row_bytes,
         out_type, stream);
  }
}

void segments(const std::int64_t* rows, const std::int64_t* entry_bag, std::int64_t n, std::int64_t,
              std::int32_t* sorted_bags, std::int64_t* unique_rows, std::int64_t* offsets,
              std::int64_t* count, StreamHandle) {
  std::vector<std::int64_t> order(n);
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t x, std::int64_t y) { return rows[x] < rows[y]; });
  std::int64_t k = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    sorted_bags[i] = static_cast<std::int32_t>(entry_bag[order[i]]);
    if (i == 0 || rows[order[i]] != rows[order[i - 1]]) {
      unique_rows[k] = rows[order[i]];
      offsets[k] = i;
      ++k;
    }
  }
  offsets[k] = n;
  *count = k;
}

void catch_up_rows(const std::int64_t* rows, std::int64_t bound, const std::int64_t* count,
                   const Values& values, std::int64_t vec_size, RowStates st, std::int64_t target,
                   const LazyParams& lazy, StreamHandle) {
  const std::int64_t n = count == nullptr ? bound : std::min(bound, *count);
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
#pragma omp parallel for schedule(static) if (n * vec_size >= 65536)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t r = rows == nullptr ? i : rows[i];
      if (r < 0 || st.last_step[r] >= target) continue;
      catch_up_row(values, lazy, value_row<V>(values, r, vec_size), row_of(st.s0, r, vec_size),
                   row_of(st.s1, r, vec_size), vec_size, st.last_step[r], target);
      st.last_step[r] = target;
    }
  });
}

// Row k's gradient (seg's k-th distinct row) in the kGradientChunk order (embedding_kernels.hpp):
// chunk sums from zero, added from zero. A 16-bit gradient widens exactly.
template <class G>
void gradient_sum(const Segments& seg, std::int64_t k, const float* scale, const G* grad,
                  std::int64_t vec_size, std::vector<float>& g, std::vector<float>& chunk) {
  std::fill(g.begin(), g.end(), 0.0f);
  for (std::int64_t first = seg.offsets[k]; first < seg.offsets[k + 1]; first += kGradientChunk) {
    const std::int64_t last = std::min(first + kGradientChunk, seg.offsets[k + 1]);
    std::fill(chunk.begin(), chunk.end(), 0.0f);
    for (std::int64_t i = first; i < last; ++i) {
      const std::int64_t bag = seg.sorted_bags[i];
      const float s = scale != nullptr ? scale[bag] : 1.0f;
      const G* gb = grad + bag * vec_size;
      for (std::int64_t c = 0; c < vec_size; ++c)
        chunk[c] += static_cast<float>(gb[c]) * s;
    }
    for (std::int64_t c = 0; c < vec_size; ++c)
      g[c] += chunk[c];
  }
}

void update_rows(const Segments& seg, const float* scale, const void* grad, ValueType grad_type,
                 const Values& values, std::int64_t vec_size, RowStates st, std::int64_t step,
                 const optim::UpdateStep& u, const LazyParams* lazy, StreamHandle) {
  const std::int64_t count = seg.entries == 0 ? 0 : *seg.count;
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    with_value_type(grad_type, [&](auto grad_tag) {
      using G = decltype(grad_tag);
      const G* grads = static_cast<const G*>(grad);
#pragma omp parallel if (count * vec_size >= 65536)
      {
        std::vector<float> g(vec_size), chunk(vec_size);
#pragma omp for schedule(dynamic, 64)
        for (std::int64_t k = 0; k < count; ++k) {
          const std::int64_t r = seg.unique_rows[k];
          if (r < 0) continue;
          gradient_sum(seg, k, scale, grads, vec_size, g, chunk);
          V* w = value_row<V>(values, r, vec_size);
          float* s0 = row_of(st.s0, r, vec_size);
          float* s1 = row_of(st.s1, r, vec_size);
          if (lazy != nullptr && st.last_step[r] < step - 1) {
            catch_up_row(values, *lazy, w, s0, s1, vec_size, st.last_step[r], step - 1);
          }
          step_row(values, u, w, g.data(), s0, s1, vec_size, step);
          if (st.last_step != nullptr) st.last_step[r] = step;
        }
      }
    });
  });
}

void update_untouched(std::int64_t bound, const std::int64_t* rows_in_use, const Values& values,
                      std::int64_t vec_size, RowStates st, std::int64_t step,
                      const optim::UpdateStep& u, StreamHandle) {
  const std::int64_t rows = rows_in_use == nullptr ? bound : std::min(bound, *rows_in_use);
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
#pragma omp parallel for schedule(static) if (rows * vec_size >= 65536)
    for (std::int64_t r = 0; r < rows; ++r) {
      if (st.last_step[r] == step) continue;
      step_row(values, u, value_row<V>(values, r, vec_size), static_cast<const float*>(nullptr),
               row_of(st.s0, r, vec_size), row_of(st.s1, r, vec_size), vec_size, step);
      st.last_step[r] = step;
    }
  });
}

void gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t count,
                 std::int64_t vec_size, StreamHandle) {
#pragma omp parallel for schedule(static) if (count * vec_size >= 65536)
  for (std::int64_t i = 0; i < count; ++i) {
    float* d = dst + i * vec_size;
    if (index[i] < 0) {
      std::fill(d, d + vec_size, 0.0f);
    } else {
      std::memcpy(d, src + index[i] * vec_size, sizeof(float) * vec_size);
    }
  }
}

void scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t count,
                  std::int64_t vec_size, StreamHandle) {
#pragma omp parallel for schedule(static) if (count * vec_size >= 65536)
  for (std::int64_t i = 0; i < count; ++i) {
    std::memcpy(dst + index[i] * vec_size, src + i * vec_size, sizeof(float) * vec_size);
  }
}

void gather_values(float* dst, const Values& values, const std::int64_t* index, std::int64_t count,
                   std::int64_t vec_size, StreamHandle) {
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
#pragma omp parallel for schedule(static) if (count * vec_size >= 65536)
    for (std::int64_t i = 0; i < count; ++i) {
      float* d = dst + i * vec_size;
      if (index[i] < 0) {
        std::fill(d, d + vec_size, 0.0f);
        continue;
      }
      const V* row = value_row<V>(values, index[i], vec_size);
      for (std::int64_t c = 0; c < vec_size; ++c)
        d[c] = static_cast<float>(row[c]);
    }
  });
}

void scatter_values(const Values& values, const float* src, const std::int64_t* index,
                    std::int64_t count, std::int64_t vec_size, StreamHandle) {
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
#pragma omp parallel for schedule(static) if (count * vec_size >= 65536)
    for (std::int64_t i = 0; i < count; ++i) {
      V* d = value_row<V>(values, index[i], vec_size);
      for (std::int64_t c = 0; c < vec_size; ++c)
        d[c] = V(src[i * vec_size + c]);
    }
  });
}

void fill_steps(std::int64_t* last_step, std::int64_t first, std::int64_t end, std::int64_t value,
                StreamHandle) {
  std::fill(last_step + first, last_step + end, value);
}

void move_rows(void* dst, const std::int64_t* dst_index, const void* src,
               const std::int64_t* src_index, std::int64_t count, std::int64_t row_bytes,
               StreamHandle) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  const auto bytes = static_cast<std::size_t>(row_bytes);
#pragma omp parallel for schedule(static) if (count * row_bytes >= (1 << 20))
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t to = dst_index ? dst_index[i] : i, from = src_index ? src_index[i] : i;
    std::memcpy(d + to * row_bytes, s + from * row_bytes, bytes);
  }
}

void map_rows(std::int64_t* rows, std::int64_t bound, const std::int64_t* count,
              const std::int32_t* map, StreamHandle) {
  const std::int64_t n = count == nullptr ? bound : std::min(bound, *count);
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    if (rows[i] >= 0) rows[i] = map[rows[i]];
  }
}

void replay_steps(const std::int64_t* slots, std::int64_t count, float* values,
                  std::int64_t vec_size, RowStates st, std::int64_t target,
                  const optim::UpdateStep* steps, StreamHandle) {
  const Values f32{values, ValueType::F32};  // host-backed tables hold f32 vectors
#pragma omp parallel for schedule(dynamic, 16) if (count * vec_size >= 65536)
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t r = slots == nullptr ? i : slots[i];
    // The same per-step call as update_untouched, so the rows end bitwise where it takes them.
    for (std::int64_t s = st.last_step[r] + 1; s <= target; ++s) {
      step_row(f32, steps[s - 1], row_of(values, r, vec_size), static_cast<const float*>(nullptr),
               row_of(st.s0, r, vec_size), row_of(st.s1, r, vec_size), vec_size, s);
    }
    st.last_step[r] = std::max(st.last_step[r], target);
  }
}

void record_row_slots(std::int64_t* row_slot, const std::int64_t* rows,
                      const std::int64_t* entry_bag, std::int64_t n,
                      const std::int64_t* owned_slots, std::int64_t owned_count,
                      const std::int64_t* range, StreamHandle) {
  const std::int64_t first = range[0], end = range[1];
  for (std::int64_t e = 0; e < n; ++e) {
    const std::int64_t r = rows[e];
    if (r >= first && r < end) row_slot[r] = owned_slots[entry_bag[e] % owned_count];
  }
}

void select_items(const std::int64_t* values, const std::int64_t* order, std::int64_t,
                  std::int64_t lo, std::int64_t hi, const std::int64_t* bounds,
                  std::int64_t segments, std::int64_t* out, std::int64_t* counts, StreamHandle) {
  std::int64_t m = 0;
  for (std::int64_t k = 0; k < segments; ++k) {
    const std::int64_t before = m;
    for (std::int64_t i = bounds[k]; i < bounds[k + 1]; ++i) {
      const std::int64_t item = order == nullptr ? i : order[i];
      if (values[item] >= lo && values[item] <= hi) out[m++] = item;
    }
    counts[k] = m - before;
  }
}

void flagged_rows(const std::int32_t* marks, std::int64_t n, std::int64_t* rows, StreamHandle) {
  for (std::int64_t i = 0; i < n; ++i)
    rows[i] = marks[i] > 0 ? i : -1;
}

template <class Key>
constexpr KeyKernels<Key> key_kernels() {
  return {.select_local = &select_local<Key>,
          .onehot_rows = &onehot_rows<Key>,
          .init_rows = &init_rows<Key>,
          .init_new_rows = &init_new_rows<Key>,
          .init_rows_at = &init_rows_at<Key>,
          .hybrid_rows = &hybrid_rows<Key>};
}

constexpr KernelTable kTable{.u32_keys = key_kernels<std::uint32_t>(),
                             .i64_keys = key_kernels<std::int64_t>(),
                             .pool = &pool,
                             .gather_codes = &gather_codes,
                             .segments = &segments,
                             .catch_up_rows = &catch_up_rows,
                             .update_rows = &update_rows,
                             .update_untouched = &update_untouched,
                             .gather_rows = &gather_rows,
                             .scatter_rows = &scatter_rows,
                             .gather_values = &gather_values,
                             .scatter_values = &scatter_values,
                             .fill_steps = &fill_steps,
                             .record_row_slots = &record_row_slots,
                             .move_rows = &move_rows,
                             .map_rows = &map_rows,
                             .replay_steps = &replay_steps,
                             .select_items = &select_items,
                             .flagged_rows = &flagged_rows};

}  // namespace

const KernelTable& table() {
  return kTable;
}

}  // namespace ember::embedding::kernels::cpu
