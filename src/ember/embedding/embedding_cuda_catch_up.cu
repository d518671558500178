// CUDA catch-up of LazyGlobal rows (see catch_up in embedding_kernels.hpp): a warp per row
// brings its weight and state from the row's last step to the target step, as Global's
// zero-gradient steps would have.
#include "ember/embedding/embedding_cuda.cuh"

namespace ember::embedding::kernels::cuda {

namespace {

template <class V>
__global__ void catch_up_kernel(const std::int64_t* __restrict__ rows, std::int64_t bound,
                                const std::int64_t* __restrict__ count_at, Values values,
                                std::int64_t vec_size, RowStates st, std::int64_t target,
                                LazyParams lazy) {
  const int lane = threadIdx.x & 31;
  const UpdateRounding<V> rounder(values, target);
  const std::int64_t count = count_at == nullptr ? bound : min(bound, *count_at);
  for (std::int64_t i = global_warp(); i < count; i += warp_count()) {
    const std::int64_t r = rows == nullptr ? i : rows[i];
    if (r < 0) continue;
    const std::int64_t from = st.last_step[r];
    if (from >= target) continue;
    V* w = static_cast<V*>(values.data) + r * vec_size;
    float* s0 = row_ptr(st.s0, r, vec_size);
    float* s1 = row_ptr(st.s1, r, vec_size);
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      float d0 = 0.f, d1 = 0.f;
      const float before = static_cast<float>(w[c]);
      float x = before;
      catch_up(lazy, x, s0 ? s0[c] : d0, s1 ? s1[c] : d1, from, target);
      w[c] = rounder(c, x, before);
    }
    __syncwarp();
    if (lane == 0) st.last_step[r] = target;
  }
}

}  // namespace

void catch_up_rows(const std::int64_t* rows, std::int64_t bound, const std::int64_t* count,
                   const Values& values, std::int64_t vec_size, RowStates states,
                   std::int64_t target, const LazyParams& lazy, StreamHandle stream) {
  if (bound <= 0) return;
  with_value_type(values.type, [&](auto tag) {
    catch_up_kernel<decltype(tag)><<<blocks_for_warps(bound), kThreads, 0, stream>>>(
        rows, bound, count, values, vec_size, states, target, lazy);
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::embedding::kernels::cuda
