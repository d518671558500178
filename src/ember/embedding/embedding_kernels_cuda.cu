// The CUDA implementation of the embedding steps (see embedding_kernels.hpp), one file a
// concept: selecting keys and starting rows (embedding_cuda_keys.cu), pooling
// (embedding_cuda_pool.cu), grouping entries by row (embedding_cuda_segments.cu), the optimizer
// update (embedding_cuda_update.cu), the LazyGlobal catch-up (embedding_cuda_catch_up.cu), row
// moves (embedding_cuda_rows.cu) and HybridSparseEmbedding's rows and compactions
// (embedding_cuda_hybrid.cu); what they share is embedding_cuda.cuh. This file collects
// them into the table that kernels::on() hands out for CUDA places.
//
// No step waits for the device unless its contract says so (select_local): counts stay in
// device memory and the kernels read them there. Temporaries come from the stream-ordered pool
// (cudaMallocAsync).
#include <array>
#include <cstdint>
#include <mutex>

#include "ember/embedding/embedding_cuda.cuh"

namespace ember::embedding::kernels::cuda {

void keep_pool_memory() {
  static std::array<std::once_flag, kMaxDevices> once;
  int device = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices) return;
  std::call_once(once[device], [device] {
    cudaMemPool_t pool = nullptr;
    EMBER_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    std::uint64_t threshold = UINT64_MAX;
    EMBER_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  });
}

const KernelTable& table() {
  static const KernelTable t{.u32_keys = key_kernels<std::uint32_t>(),
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
  return t;
}

}  // namespace ember::embedding::kernels::cuda
