// CUDA row moves of the embedding (see embedding_kernels.hpp): gathering and scattering
// whole rows (exchanges, loading), filling last_step, recording the slot of new rows, and the
// host-backed tables' moves (rows of any width between the cache, staging buffers and pinned
// host memory; table rows mapped to cache slots).
#include <cstddef>

#include "ember/embedding/embedding_cuda.cuh"

namespace ember::embedding::kernels::cuda {

namespace {

__global__ void gather_kernel(float* __restrict__ dst, const float* __restrict__ src,
                              const std::int64_t* __restrict__ index, std::int64_t count,
                              std::int64_t vec_size) {
  const std::int64_t n = count * vec_size;
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    const std::int64_t from = index[i / vec_size];
    dst[i] = from < 0 ? 0.f : src[from * vec_size + i % vec_size];
  }
}

__global__ void scatter_kernel(float* __restrict__ dst, const float* __restrict__ src,
                               const std::int64_t* __restrict__ index, std::int64_t count,
                               std::int64_t vec_size) {
  const std::int64_t n = count * vec_size;
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    dst[index[i / vec_size] * vec_size + i % vec_size] = src[i];
  }
}

template <class V>
__global__ void gather_values_kernel(float* __restrict__ dst, const V* __restrict__ src,
                                     const std::int64_t* __restrict__ index, std::int64_t count,
                                     std::int64_t vec_size) {
  const std::int64_t n = count * vec_size;
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    const std::int64_t from = index[i / vec_size];
    dst[i] = from < 0 ? 0.f : static_cast<float>(src[from * vec_size + i % vec_size]);
  }
}

template <class V>
__global__ void scatter_values_kernel(V* __restrict__ dst, const float* __restrict__ src,
                                      const std::int64_t* __restrict__ index, std::int64_t count,
                                      std::int64_t vec_size) {
  const std::int64_t n = count * vec_size;
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    dst[index[i / vec_size] * vec_size + i % vec_size] = V(src[i]);
  }
}

__global__ void fill_steps_kernel(std::int64_t* __restrict__ last_step, std::int64_t first,
                                  std::int64_t end, std::int64_t value) {
  for (std::int64_t r = first + global_thread(); r < end; r += thread_count())
    last_step[r] = value;
}

__global__ void row_slots_kernel(std::int64_t* __restrict__ row_slot,
                                 const std::int64_t* __restrict__ rows,
                                 const std::int64_t* __restrict__ entry_bag, std::int64_t n,
                                 const std::int64_t* __restrict__ owned_slots,
                                 std::int64_t owned_count, const std::int64_t* __restrict__ range) {
  const std::int64_t first = range[0], end = range[1];
  for (std::int64_t e = global_thread(); e < n; e += thread_count()) {
    const std::int64_t r = rows[e];
    if (r >= first && r < end) row_slot[r] = owned_slots[entry_bag[e] % owned_count];
  }
}

// A warp per row, each lane moving Word-sized pieces (16, 8, 4 or 1 bytes: what the row size and
// the pointers allow). Rows of host-backed tables are 0.5-2 KB, so a warp moves a row in one or
// a few coalesced passes, over PCIe too when one side is pinned host memory.
template <class Word>
__global__ void move_rows_kernel(std::byte* __restrict__ dst, const std::int64_t* dst_index,
                                 const std::byte* __restrict__ src, const std::int64_t* src_index,
                                 std::int64_t count, std::int64_t row_bytes) {
  const int lane = threadIdx.x & 31;
  const std::int64_t words = row_bytes / static_cast<std::int64_t>(sizeof(Word));
  for (std::int64_t i = global_warp(); i < count; i += warp_count()) {
    const std::int64_t to = dst_index ? dst_index[i] : i, from = src_index ? src_index[i] : i;
    auto* d = reinterpret_cast<Word*>(dst + to * row_bytes);
    const auto* s = reinterpret_cast<const Word*>(src + from * row_bytes);
    for (std::int64_t w = lane; w < words; w += 32)
      d[w] = s[w];
  }
}

__global__ void map_rows_kernel(std::int64_t* __restrict__ rows, std::int64_t bound,
                                const std::int64_t* __restrict__ count_at,
                                const std::int32_t* __restrict__ map) {
  const std::int64_t n = count_at == nullptr ? bound : min(bound, *count_at);
  for (std::int64_t i = global_thread(); i < n; i += thread_count()) {
    const std::int64_t r = rows[i];
    if (r >= 0) rows[i] = map[r];
  }
}

}  // namespace

void move_rows(void* dst, const std::int64_t* dst_index, const void* src,
               const std::int64_t* src_index, std::int64_t count, std::int64_t row_bytes,
               StreamHandle stream) {
  if (count <= 0 || row_bytes <= 0) return;
  const auto address =
      reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src);
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  const int blocks = blocks_for_warps(count);
  auto fits = [&](std::int64_t word) { return row_bytes % word == 0 && address % word == 0; };
  if (fits(16)) {
    move_rows_kernel<uint4>
        <<<blocks, kThreads, 0, stream>>>(d, dst_index, s, src_index, count, row_bytes);
  } else if (fits(8)) {
    move_rows_kernel<std::uint64_t>
        <<<blocks, kThreads, 0, stream>>>(d, dst_index, s, src_index, count, row_bytes);
  } else if (fits(4)) {
    move_rows_kernel<std::uint32_t>
        <<<blocks, kThreads, 0, stream>>>(d, dst_index, s, src_index, count, row_bytes);
  } else {
    move_rows_kernel<std::uint8_t>
        <<<blocks, kThreads, 0, stream>>>(d, dst_index, s, src_index, count, row_bytes);
  }
  EMBER_CUDA_CHECK_LAUNCH();
}

void map_rows(std::int64_t* rows, std::int64_t bound, const std::int64_t* count,
              const std::int32_t* map, StreamHandle stream) {
  if (bound <= 0) return;
  map_rows_kernel<<<blocks_for_threads(bound), kThreads, 0, stream>>>(rows, bound, count, map);
  EMBER_CUDA_CHECK_LAUNCH();
}

void gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t count,
                 std::int64_t vec_size, StreamHandle stream) {
  if (count * vec_size == 0) return;
  gather_kernel<<<blocks_for_threads(count * vec_size), kThreads, 0, stream>>>(dst, src, index,
                                                                               count, vec_size);
  EMBER_CUDA_CHECK_LAUNCH();
}

void scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t count,
                  std::int64_t vec_size, StreamHandle stream) {
  if (count * vec_size == 0) return;
  scatter_kernel<<<blocks_for_threads(count * vec_size), kThreads, 0, stream>>>(dst, src, index,
                                                                                count, vec_size);
  EMBER_CUDA_CHECK_LAUNCH();
}

void gather_values(float* dst, const Values& values, const std::int64_t* index, std::int64_t count,
                   std::int64_t vec_size, StreamHandle stream) {
  if (count * vec_size == 0) return;
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    gather_values_kernel<V><<<blocks_for_threads(count * vec_size), kThreads, 0, stream>>>(
        dst, static_cast<const V*>(values.data), index, count, vec_size);
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

void scatter_values(const Values& values, const float* src, const std::int64_t* index,
                    std::int64_t count, std::int64_t vec_size, StreamHandle stream) {
  if (count * vec_size == 0) return;
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    scatter_values_kernel<V><<<blocks_for_threads(count * vec_size), kThreads, 0, stream>>>(
        static_cast<V*>(values.data), src, index, count, vec_size);
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

void fill_steps(std::int64_t* last_step, std::int64_t first, std::int64_t end, std::int64_t value,
                StreamHandle stream) {
  if (end <= first) return;
  fill_steps_kernel<<<blocks_for_threads(end - first), kThreads, 0, stream>>>(last_step, first, end,
                                                                              value);
  EMBER_CUDA_CHECK_LAUNCH();
}

void record_row_slots(std::int64_t* row_slot, const std::int64_t* rows,
                      const std::int64_t* entry_bag, std::int64_t n,
                      const std::int64_t* owned_slots, std::int64_t owned_count,
                      const std::int64_t* range, StreamHandle stream) {
  if (n == 0 || owned_count == 0) return;
  row_slots_kernel<<<blocks_for_threads(n), kThreads, 0, stream>>>(row_slot, rows, entry_bag, n,
                                                                   owned_slots, owned_count, range);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::embedding::kernels::cuda
