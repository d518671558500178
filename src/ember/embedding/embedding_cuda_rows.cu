// CUDA row moves of the embedding (see embedding_kernels.hpp): gathering and scattering
// whole rows (exchanges, loading), filling last_step, and recording the slot of new rows.
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

}  // namespace

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
