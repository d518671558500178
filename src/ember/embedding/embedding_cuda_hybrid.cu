// CUDA steps of HybridSparseEmbedding (see hybrid_rows, select_items and flagged_rows in
// embedding_kernels.hpp): a thread per bag of the global batch for its rows, a flag pass, a CUB
// scan and a scatter for the compactions. Nothing waits for the device.
#include <cub/cub.cuh>

#include "ember/embedding/embedding_cuda.cuh"

namespace ember::embedding::kernels::cuda {

namespace {

// The same decisions as the CPU's hybrid_rows, a thread per bag.
template <class Key>
__global__ void hybrid_rows_kernel(HybridArgs a, const Key* __restrict__ keys, HybridRows out,
                                   unsigned long long* first_bad) {
  const std::int64_t S = a.slot_num, bags = a.batch * S;
  const std::int64_t local_first = a.local_offset * S;
  const std::int64_t local_end = (a.local_offset + a.local_size) * S;
  for (std::int64_t g = global_thread(); g < bags; g += thread_count()) {
    const std::int64_t b = g / S, s = g - b * S;
    const std::int64_t begin = a.offsets[g], n = a.offsets[g + 1] - begin;
    const std::int64_t key = n > 0 ? static_cast<std::int64_t>(keys[begin]) : -1;
    const bool inside = n == 1 && key >= a.slot_begin[s] && key < a.slot_begin[s + 1];
    if (n > 1 || (n == 1 && !inside)) atomicMin(first_bad, static_cast<unsigned long long>(g));
    const std::int64_t f = n == 1 && a.frequent != nullptr ? a.frequent[begin] : -1;
    const bool frequent = f >= 0 && inside, infrequent = n == 1 && f < 0;
    // Plain stores of the same value by any number of threads, each after a load: thousands of
    // bags of a batch hold a hot row's key, and a store from each would queue on one address in
    // L2 (the kernel took 0.2-0.33 ms beside training on 2 GPUs; loading first gave DLRM mixed
    // on 2 H200s +2 %). A stale 0 read only repeats the store.
    if (frequent && out.used != nullptr && out.used[f] == 0) out.used[f] = 1;
    if (g >= local_first && g < local_end) {
      const std::int64_t l = g - local_first;
      out.frequent_rows[l] = frequent ? f : -1;
      out.expect[l] = infrequent ? 1 : 0;
      if (frequent && out.local_used != nullptr && out.local_used[f] == 0) out.local_used[f] = 1;
    }
    if (s % a.ranks == a.rank) {
      out.owned_rows[b * a.owned_count + s / a.ranks] =
          !infrequent ? -2
          : inside    ? a.local_base[s] + (key - a.slot_begin[s])
                      : -1;
    }
  }
}

// bad[0] holds the first bad bag (all ones, i.e. -1: none); adds its first key and key count.
template <class Key>
__global__ void hybrid_report_kernel(const std::int64_t* __restrict__ offsets,
                                     const Key* __restrict__ keys, std::int64_t* __restrict__ bad) {
  const std::int64_t g = bad[0];
  if (g >= 0) {
    bad[1] = static_cast<std::int64_t>(keys[offsets[g]]);
    bad[2] = offsets[g + 1] - offsets[g];
  }
}

// flags[i] = 1 when position i's item is selected, for i < n; flags[n] = 0 (so that the
// exclusive scan's last entry is the total).
__global__ void select_flags_kernel(const std::int64_t* __restrict__ values,
                                    const std::int64_t* __restrict__ order, std::int64_t n,
                                    std::int64_t lo, std::int64_t hi, int* __restrict__ flags) {
  for (std::int64_t i = global_thread(); i <= n; i += thread_count()) {
    if (i == n) {
      flags[i] = 0;
      continue;
    }
    const std::int64_t v = values[order == nullptr ? i : order[i]];
    flags[i] = v >= lo && v <= hi ? 1 : 0;
  }
}

__global__ void select_scatter_kernel(const std::int64_t* __restrict__ order, std::int64_t n,
                                      const int* __restrict__ flags,
                                      const std::int64_t* __restrict__ position,
                                      std::int64_t* __restrict__ out) {
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    if (flags[i] != 0) out[position[i]] = order == nullptr ? i : order[i];
  }
}

__global__ void select_counts_kernel(const std::int64_t* __restrict__ position,
                                     const std::int64_t* __restrict__ bounds, std::int64_t segments,
                                     std::int64_t* __restrict__ counts) {
  for (std::int64_t k = global_thread(); k < segments; k += thread_count())
    counts[k] = position[bounds[k + 1]] - position[bounds[k]];
}

__global__ void flagged_rows_kernel(const std::int32_t* __restrict__ marks, std::int64_t n,
                                    std::int64_t* __restrict__ rows) {
  for (std::int64_t i = global_thread(); i < n; i += thread_count())
    rows[i] = marks[i] > 0 ? i : -1;
}

}  // namespace

template <class Key>
void hybrid_rows(const HybridArgs& a, const Key* keys, const HybridRows& out, StreamHandle stream) {
  EMBER_CUDA_CHECK(cudaMemsetAsync(out.bad, 0xFF, sizeof(std::int64_t), stream));
  const std::int64_t bags = a.batch * a.slot_num;
  if (bags == 0) return;
  hybrid_rows_kernel<Key><<<blocks_for_threads(bags), kThreads, 0, stream>>>(
      a, keys, out, reinterpret_cast<unsigned long long*>(out.bad));
  EMBER_CUDA_CHECK_LAUNCH();
  hybrid_report_kernel<Key><<<1, 1, 0, stream>>>(a.offsets, keys, out.bad);
  EMBER_CUDA_CHECK_LAUNCH();
}
template void hybrid_rows<std::uint32_t>(const HybridArgs&, const std::uint32_t*, const HybridRows&,
                                         StreamHandle);
template void hybrid_rows<std::int64_t>(const HybridArgs&, const std::int64_t*, const HybridRows&,
                                        StreamHandle);

void select_items(const std::int64_t* values, const std::int64_t* order, std::int64_t n,
                  std::int64_t lo, std::int64_t hi, const std::int64_t* bounds,
                  std::int64_t segments, std::int64_t* out, std::int64_t* counts,
                  StreamHandle stream) {
  if (segments <= 0) return;
  Temp flags((n + 1) * sizeof(int), stream);
  Temp position((n + 1) * sizeof(std::int64_t), stream);
  select_flags_kernel<<<blocks_for_threads(n + 1), kThreads, 0, stream>>>(values, order, n, lo, hi,
                                                                          flags.as<int>());
  EMBER_CUDA_CHECK_LAUNCH();
  std::size_t scan_bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, flags.as<int>(),
                                                 position.as<std::int64_t>(), n + 1, stream));
  Temp temp(scan_bytes, stream);
  EMBER_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.as<void>(), scan_bytes, flags.as<int>(),
                                                 position.as<std::int64_t>(), n + 1, stream));
  if (n > 0) {
    select_scatter_kernel<<<blocks_for_threads(n), kThreads, 0, stream>>>(
        order, n, flags.as<int>(), position.as<std::int64_t>(), out);
    EMBER_CUDA_CHECK_LAUNCH();
  }
  select_counts_kernel<<<blocks_for_threads(segments), kThreads, 0, stream>>>(
      position.as<std::int64_t>(), bounds, segments, counts);
  EMBER_CUDA_CHECK_LAUNCH();
}

void flagged_rows(const std::int32_t* marks, std::int64_t n, std::int64_t* rows,
                  StreamHandle stream) {
  if (n <= 0) return;
  flagged_rows_kernel<<<blocks_for_threads(n), kThreads, 0, stream>>>(marks, n, rows);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::embedding::kernels::cuda
