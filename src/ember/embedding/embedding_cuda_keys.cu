// CUDA steps that read keys: picking the rank's keys out of the global batch (select_local),
// the rows of one-hot keys, and the initial values of rows from their keys (see
// embedding_kernels.hpp).
#include <cub/cub.cuh>

#include "ember/embedding/embedding_cuda.cuh"

namespace ember::embedding::kernels::cuda {

namespace {

// ---- select ---------------------------------------------------------------------------------

template <class Key>
__global__ void count_kernel(SelectArgs a, const Key* __restrict__ keys,
                             std::int64_t* __restrict__ counts, float* __restrict__ scale) {
  const std::int64_t bags = a.bags();
  for (std::int64_t bag = global_thread(); bag < bags; bag += thread_count()) {
    const std::int64_t g = a.global_row(bag);
    const std::int64_t begin = a.offsets[g], end = a.offsets[g + 1];
    std::int64_t count = 0;
    for (std::int64_t e = begin; e < end; ++e)
      count += a.owns(keys[e]);
    counts[bag] = count;
    const std::int64_t nnz = end - begin;
    scale[bag] = !a.mean ? 1.0f : (nnz == 0 ? 0.0f : 1.0f / static_cast<float>(nnz));
  }
}

template <class Key>
__global__ void fill_kernel(SelectArgs a, const Key* __restrict__ keys,
                            const std::int64_t* __restrict__ local_offsets,
                            Key* __restrict__ local_keys, std::int64_t* __restrict__ entry_bag) {
  const std::int64_t bags = a.bags();
  for (std::int64_t bag = global_thread(); bag < bags; bag += thread_count()) {
    const std::int64_t g = a.global_row(bag);
    std::int64_t out = local_offsets[bag];
    for (std::int64_t e = a.offsets[g]; e < a.offsets[g + 1]; ++e) {
      const Key key = keys[e];
      if (a.owns(key)) {
        local_keys[out] = key;
        entry_bag[out] = bag;
        ++out;
      }
    }
  }
}

// A rank that holds every key (selects_all()) pools every global row as bag = global row (one
// rank; or every slot owned, in order), so its CSR is the global one rebased to 0: one pass, a
// thread per bag, instead of count, scan and fill.
template <class Key>
__global__ void select_all_kernel(SelectArgs a, const Key* __restrict__ keys,
                                  std::int64_t* __restrict__ local_offsets,
                                  Key* __restrict__ local_keys,
                                  std::int64_t* __restrict__ entry_bag, float* __restrict__ scale) {
  const std::int64_t bags = a.bags(), base = a.offsets[0];
  for (std::int64_t bag = global_thread(); bag < bags; bag += thread_count()) {
    const std::int64_t begin = a.offsets[bag], end = a.offsets[bag + 1];
    local_offsets[bag + 1] = end - base;
    for (std::int64_t e = begin; e < end; ++e) {
      local_keys[e - base] = keys[e];
      entry_bag[e - base] = bag;
    }
    const std::int64_t nnz = end - begin;
    scale[bag] = !a.mean ? 1.0f : (nnz == 0 ? 0.0f : 1.0f / static_cast<float>(nnz));
  }
}

template <class Key>
std::int64_t select_local(const SelectArgs& a, const Key* keys, std::int64_t* local_offsets,
                          Key* local_keys, std::int64_t* entry_bag, float* scale,
                          StreamHandle stream) {
  const std::int64_t bags = a.bags();
  EMBER_CUDA_CHECK(cudaMemsetAsync(local_offsets, 0, sizeof(std::int64_t), stream));
  if (bags == 0) return 0;
  if (a.selects_all()) {
    select_all_kernel<Key><<<blocks_for_threads(bags), kThreads, 0, stream>>>(
        a, keys, local_offsets, local_keys, entry_bag, scale);
    EMBER_CUDA_CHECK_LAUNCH();
    return a.nnz;
  }
  Temp counts(bags * sizeof(std::int64_t), stream);
  count_kernel<Key><<<blocks_for_threads(bags), kThreads, 0, stream>>>(
      a, keys, counts.as<std::int64_t>(), scale);
  EMBER_CUDA_CHECK_LAUNCH();
  std::size_t temp_bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, counts.as<std::int64_t>(),
                                                 local_offsets + 1, bags, stream));
  Temp temp(temp_bytes, stream);
  EMBER_CUDA_CHECK(cub::DeviceScan::InclusiveSum(
      temp.as<void>(), temp_bytes, counts.as<std::int64_t>(), local_offsets + 1, bags, stream));
  fill_kernel<Key><<<blocks_for_threads(bags), kThreads, 0, stream>>>(a, keys, local_offsets,
                                                                      local_keys, entry_bag);
  EMBER_CUDA_CHECK_LAUNCH();
  return read_back(local_offsets + bags, stream);
}

// ---- one-hot rows and initialisation ----------------------------------------------------------

template <class Key>
__global__ void onehot_kernel(OneHotArgs a, const Key* __restrict__ keys,
                              const std::int64_t* __restrict__ entry_bag, std::int64_t n,
                              std::int64_t* __restrict__ rows, unsigned long long* first_bad) {
  for (std::int64_t e = global_thread(); e < n; e += thread_count()) {
    const std::int64_t j = entry_bag[e] % a.owned_count;
    const auto key = static_cast<std::int64_t>(keys[e]);
    const bool second = a.one_key_per_bag && e > 0 && entry_bag[e] == entry_bag[e - 1];
    if (key < a.begin[j] || key >= a.begin[j] + a.size[j] || second) {
      rows[e] = -1;
      atomicMin(first_bad, static_cast<unsigned long long>(e));
    } else {
      rows[e] = a.local_base[j] + (key - a.begin[j]);
    }
  }
}

// bad[0] holds the first bad entry (all ones: none); adds its key and bag for the message.
template <class Key>
__global__ void onehot_report_kernel(const Key* __restrict__ keys,
                                     const std::int64_t* __restrict__ entry_bag,
                                     std::int64_t* __restrict__ bad) {
  const std::int64_t e = bad[0];
  if (e >= 0) {
    bad[1] = static_cast<std::int64_t>(keys[e]);
    bad[2] = entry_bag[e];
  }
}

template <class Key, class V>
__global__ void init_kernel(V* __restrict__ values, std::int64_t vec_size, std::int64_t first,
                            std::int64_t end, const Key* __restrict__ keys_by_row,
                            std::uint64_t seed, float bound) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t r = first + global_warp(); r < end; r += warp_count()) {
    const std::uint64_t row_stream =
        row_init_stream(seed, static_cast<std::uint64_t>(keys_by_row[r]));
    for (std::int64_t c = lane; c < vec_size; c += 32)
      values[r * vec_size + c] = V(initial_value_at(row_stream, c, bound));
  }
}

// A warp per new row: the row's random stream is mixed once, its columns by the lanes.
template <class Key, class V>
__global__ void init_new_rows_kernel(NewRows fresh, const Key* __restrict__ keys_by_row,
                                     RowInit init, V* __restrict__ values, std::int64_t vec_size,
                                     RowStates st) {
  const int lane = threadIdx.x & 31;
  const std::int64_t first = fresh.range[0], end = fresh.range[1];
  for (std::int64_t r = first + global_warp(); r < end; r += warp_count()) {
    const std::uint64_t row_stream =
        row_init_stream(init.seed, static_cast<std::uint64_t>(keys_by_row[r]));
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      const std::int64_t at = r * vec_size + c;
      values[at] = V(initial_value_at(row_stream, c, init.bound));
      if (st.s0 != nullptr) st.s0[at] = init.state0;
      if (st.s1 != nullptr) st.s1[at] = init.state1;
    }
    if (lane == 0 && st.last_step != nullptr) st.last_step[r] = init.step;
  }
}

// init_new_rows_kernel's work for listed rows, written at their cache slots.
template <class Key>
__global__ void init_rows_at_kernel(const std::int64_t* __restrict__ rows,
                                    const std::int64_t* __restrict__ slots, std::int64_t count,
                                    const Key* __restrict__ keys_by_row, RowInit init,
                                    float* __restrict__ values, std::int64_t vec_size,
                                    RowStates st) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t i = global_warp(); i < count; i += warp_count()) {
    const std::int64_t slot = slots[i];
    const std::uint64_t row_stream =
        row_init_stream(init.seed, static_cast<std::uint64_t>(keys_by_row[rows[i]]));
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      const std::int64_t at = slot * vec_size + c;
      values[at] = initial_value_at(row_stream, c, init.bound);
      if (st.s0 != nullptr) st.s0[at] = init.state0;
      if (st.s1 != nullptr) st.s1[at] = init.state1;
    }
    if (lane == 0 && st.last_step != nullptr) st.last_step[slot] = init.step;
  }
}

template <class Key>
void onehot_rows(const OneHotArgs& a, const Key* local_keys, const std::int64_t* entry_bag,
                 std::int64_t n, std::int64_t* rows, std::int64_t* bad, StreamHandle stream) {
  EMBER_CUDA_CHECK(cudaMemsetAsync(bad, 0xFF, sizeof(std::int64_t), stream));
  if (n == 0) return;
  onehot_kernel<Key><<<blocks_for_threads(n), kThreads, 0, stream>>>(
      a, local_keys, entry_bag, n, rows, reinterpret_cast<unsigned long long*>(bad));
  EMBER_CUDA_CHECK_LAUNCH();
  onehot_report_kernel<Key><<<1, 1, 0, stream>>>(local_keys, entry_bag, bad);
  EMBER_CUDA_CHECK_LAUNCH();
}

// Grid of a kernel that loops over new rows: enough warps to fill the device, whatever the bound.
int blocks_for_new_rows(std::int64_t max_rows) {
  return std::min(blocks_for_warps(max_rows), 132 * 8);
}

template <class Key>
void init_rows(const Values& values, std::int64_t vec_size, std::int64_t first, std::int64_t end,
               const Key* keys_by_row, std::uint64_t seed, float bound, StreamHandle stream) {
  if (end <= first) return;
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    init_kernel<Key, V><<<blocks_for_new_rows(end - first), kThreads, 0, stream>>>(
        static_cast<V*>(values.data), vec_size, first, end, keys_by_row, seed, bound);
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

template <class Key>
void init_new_rows(const NewRows& fresh, const Key* keys_by_row, const RowInit& init,
                   const Values& values, std::int64_t vec_size, RowStates states,
                   StreamHandle stream) {
  if (fresh.max_rows <= 0) return;
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    init_new_rows_kernel<Key, V><<<blocks_for_new_rows(fresh.max_rows), kThreads, 0, stream>>>(
        fresh, keys_by_row, init, static_cast<V*>(values.data), vec_size, states);
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

template <class Key>
void init_rows_at(const std::int64_t* rows, const std::int64_t* slots, std::int64_t count,
                  const Key* keys_by_row, const RowInit& init, float* values, std::int64_t vec_size,
                  RowStates states, StreamHandle stream) {
  if (count <= 0) return;
  init_rows_at_kernel<Key><<<blocks_for_new_rows(count), kThreads, 0, stream>>>(
      rows, slots, count, keys_by_row, init, values, vec_size, states);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class Key>
KeyKernels<Key> key_kernels() {
  return {.select_local = &select_local<Key>,
          .onehot_rows = &onehot_rows<Key>,
          .init_rows = &init_rows<Key>,
          .init_new_rows = &init_new_rows<Key>,
          .init_rows_at = &init_rows_at<Key>,
          .hybrid_rows = &hybrid_rows<Key>};
}
template KeyKernels<std::uint32_t> key_kernels<std::uint32_t>();
template KeyKernels<std::int64_t> key_kernels<std::int64_t>();

}  // namespace ember::embedding::kernels::cuda
