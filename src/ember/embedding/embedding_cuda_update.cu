// The CUDA optimizer update of the embedding (see update_rows in embedding_kernels.hpp and
// docs/embedding.md, "The GPU backward"). The update is planned per batch: a row with at most
// kGradientChunk occurrences is one work item for one warp, which sums its gradients and
// updates weight and state in one pass; a hotter row is cut into chunks of kGradientChunk
// occurrences, one warp each, whose partial sums the last warp to finish adds in chunk order
// before it updates the row. Sums use separately rounded multiplies and adds in the
// kGradientChunk order, so they are bitwise the CPU's.
#include <climits>

#include "ember/embedding/embedding_cuda.cuh"

namespace ember::embedding::kernels::cuda {

namespace {

// W floats per lane: 4 (16-byte accesses, 128 columns a warp pass; vec_size % 4 == 0 and aligned
// pointers) or 1 (any vec_size, 32 columns a pass).
template <int W>
struct Lanes;

template <>
struct Lanes<4> {
  using T = float4;
  // A table's weights, widened from (and rounded back into) V.
  template <class V>
  __device__ static T load_values(const V* p) {
    return load4(p);
  }
  template <class V>
  __device__ static void store_values(V* p, const V (&v)[4]) {
    store4(p, v);
  }
  static constexpr int kColumns = 128;
  __device__ static T zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
  __device__ static T load(const float* p) { return *reinterpret_cast<const float4*>(p); }
  // An output gradient's values (f32, or 16-bit widened exactly), read-only.
  template <class G>
  __device__ static T load_grad(const G* p) {
    return ldg4(p);
  }
  // Partial sums written by other warps during the kernel: read from L2, never a stale L1 line.
  __device__ static T load_l2(const float* p) { return __ldcg(reinterpret_cast<const float4*>(p)); }
  __device__ static void store(float* p, const T& v) { *reinterpret_cast<float4*>(p) = v; }
  __device__ static void store_l2(float* p, const T& v) { __stcg(reinterpret_cast<float4*>(p), v); }
  __device__ static float& at(T& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
  }
  // g += v * s and g += p with separately rounded multiply and add (no fused multiply-add), so
  // the sums are bitwise the CPU's: Adam and AdaGrad divide by the gradient's own magnitude,
  // which would magnify a last-bit difference in a sum that nearly cancels.
  __device__ static void add_scaled(T& g, const T& v, float s) {
    g.x = __fadd_rn(g.x, __fmul_rn(v.x, s));
    g.y = __fadd_rn(g.y, __fmul_rn(v.y, s));
    g.z = __fadd_rn(g.z, __fmul_rn(v.z, s));
    g.w = __fadd_rn(g.w, __fmul_rn(v.w, s));
  }
  __device__ static void add(T& g, const T& p) {
    g.x = __fadd_rn(g.x, p.x);
    g.y = __fadd_rn(g.y, p.y);
    g.z = __fadd_rn(g.z, p.z);
    g.w = __fadd_rn(g.w, p.w);
  }
};

template <>
struct Lanes<1> {
  using T = float;
  template <class V>
  __device__ static T load_values(const V* p) {
    return static_cast<float>(*p);
  }
  template <class V>
  __device__ static void store_values(V* p, const V (&v)[1]) {
    *p = v[0];
  }
  static constexpr int kColumns = 32;
  __device__ static T zero() { return 0.f; }
  __device__ static T load(const float* p) { return *p; }
  template <class G>
  __device__ static T load_grad(const G* p) {
    return ldg1(p);
  }
  __device__ static T load_l2(const float* p) { return __ldcg(p); }
  __device__ static void store(float* p, const T& v) { *p = v; }
  __device__ static void store_l2(float* p, const T& v) { __stcg(p, v); }
  __device__ static float& at(T& v, int) { return v; }
  __device__ static void add_scaled(T& g, const T& v, float s) {
    g = __fadd_rn(g, __fmul_rn(v, s));
  }
  __device__ static void add(T& g, const T& p) { g = __fadd_rn(g, p); }
};

// Row loads each lane keeps in flight while it sums: a warp moves 4 x 512 bytes of a dim-128
// gradient at once, and 32 warps an SM (kUpdateBlocksPerSm) make 64 KB in flight per SM. 8 loads
// need about 104 registers, which halves the warps an SM holds for the same bytes in flight and
// leaves the short rows (one or two entries, where the loads are few anyway) with half the warps.
constexpr int kLoadsInFlight = 4;
// The last warp of a hot row reads its partial sums (from L2) this many at a time (8 spill at
// 64 registers). The hottest row of the benchmark's pooling-8 batch has 1448 chunks: some 360
// L2 round trips at the end of that row, which the persistent grid overlaps with the rest of the
// batch (hot chunks are the first items).
constexpr int kPartialsInFlight = 4;

__device__ inline void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Whether sum_entries asks L2 for a batch's 32 gradient rows before it loads them
// kLoadsInFlight at a time. Measured on an H200 (bench_embedding sections (c) and (e),
// docs/performance.md): it gains 8-13 % where a 16-bit gradient updates an f32 table (mixed
// precision's default, and the hybrid's frequent sums) and loses 0-7 % elsewhere (f32
// gradients, 16-bit tables), where the kernel is closer to the bandwidth.
template <class V, class G>
constexpr bool prefetch_gradient_rows() {
  return sizeof(G) == 2 && sizeof(V) == 4;
}

// A lane's entry of a group of 32 sorted entries (lanes past the group's m: bag 0, scale 1).
struct LaneEntry {
  std::int32_t bag = 0;
  float scale = 1.f;
  bool known = false;  // the first entry's, whose bag and scale came with the row
};

// Lane `lane`'s entry of the group from `base`: its bag (the first entry's may come known,
// first_bag >= 0, with its scale). Its scale, when not known, is load_scale()'s: a dependent
// load the caller places where it overlaps best.
__device__ __forceinline__ LaneEntry lane_entry(const std::int32_t* __restrict__ bags,
                                                std::int64_t base, std::int64_t first, int m,
                                                int lane, std::int32_t first_bag,
                                                float first_scale) {
  LaneEntry e;
  e.known = base == first && lane == 0 && first_bag >= 0;
  if (e.known) {
    e.bag = first_bag;
    e.scale = first_scale;
  } else if (lane < m) {
    e.bag = bags[base + lane];
  }
  return e;
}

__device__ __forceinline__ void load_scale(LaneEntry& e, const float* __restrict__ scale, int m,
                                           int lane) {
  if (lane < m && scale != nullptr && !e.known) e.scale = scale[e.bag];
}

// The sum from zero, in entry order, of grad[bag] * scale[bag] (grad of type G, widened to f32
// as it is read; a null scale is 1, which spares a dependent load per 32 entries) over sorted
// entries [first, last), for this lane's columns c .. c + W - 1. The entries' bags (and scales)
// are fetched 32 at a time (a lane each) and shuffled out; the first entry's bag and scale may
// come known (first_bag >= 0), which spares a one-entry row two dependent loads before its
// gradient row. Every lane of the warp must call it.
template <int W, class G, bool Prefetch>
__device__ typename Lanes<W>::T sum_entries(const std::int32_t* __restrict__ bags,
                                            const float* __restrict__ scale,
                                            const G* __restrict__ grad, std::int64_t vec_size,
                                            std::int64_t c, bool active, std::int64_t first,
                                            std::int64_t last, std::int32_t first_bag,
                                            float first_scale, int lane) {
  using L = Lanes<W>;
  typename L::T g = L::zero();
  for (std::int64_t base = first; base < last; base += 32) {
    const int m = static_cast<int>(last - base < 32 ? last - base : 32);
    LaneEntry mine = lane_entry(bags, base, first, m, lane, first_bag, first_scale);
    // With Prefetch each lane asks L2 for its entry's row piece of this pass (kColumns columns),
    // and lane 0 for the next 32 entries' bags, so that the loads below wait for L2 rather than
    // for HBM: a warp then has 32 rows coming instead of kLoadsInFlight, at no register cost.
    if (lane < m) {
      if constexpr (Prefetch) {
        const std::int64_t c0 = c - W * lane;  // the pass's first column
        const char* row = reinterpret_cast<const char*>(
            grad + static_cast<std::int64_t>(mine.bag) * vec_size + c0);
        const std::int64_t row_bytes = (vec_size - c0) * static_cast<std::int64_t>(sizeof(G));
#pragma unroll
        for (int k = 0; k < (L::kColumns * static_cast<int>(sizeof(G)) + 127) / 128; ++k) {
          if (k * 128 < row_bytes) prefetch_l2(row + k * 128);
        }
        if (lane == 0 && base + 32 < last) prefetch_l2(bags + base + 32);
      }
    }
    load_scale(mine, scale, m, lane);
    for (int j = 0; j < m; j += kLoadsInFlight) {
      int b[kLoadsInFlight];
      float s[kLoadsInFlight];
      typename L::T v[kLoadsInFlight];
#pragma unroll
      for (int q = 0; q < kLoadsInFlight; ++q) {
        b[q] = __shfl_sync(0xffffffffu, mine.bag, (j + q) & 31);
        s[q] = __shfl_sync(0xffffffffu, mine.scale, (j + q) & 31);
      }
      if (active) {
#pragma unroll
        for (int q = 0; q < kLoadsInFlight; ++q) {
          if (j + q < m) v[q] = L::load_grad(grad + static_cast<std::int64_t>(b[q]) * vec_size + c);
        }
#pragma unroll
        for (int q = 0; q < kLoadsInFlight; ++q) {
          if (j + q < m) L::add_scaled(g, v[q], s[q]);
        }
      }
    }
  }
  return g;
}

// Rows of at most kNarrowColumns columns (DeepFM's 11, Wide&Deep's 1 and 16, DCN's 16) take
// sum_entries_narrow. sum_entries gives a lane a column (or four) and loads kLoadsInFlight
// entries' row pieces a round: at 16 columns that leaves most lanes idle and a warp 8 dependent
// rounds per 32 entries (Wide&Deep's 16-wide table took 165 us a training step on an H200 for
// 1.7 M entries, about ten times its bytes' time).
constexpr int kNarrowColumns = 16;
// The tile's row stride: odd, so that lane j's entry row starts in its own bank.
constexpr int kTileStride = kNarrowColumns + 1;

// A warp's 32 entries' gradient rows (f32) and scales, between loading and summing.
struct NarrowTile {
  float values[32 * kTileStride];
  float scales[32];
};

// sum_entries for rows of at most kNarrowColumns columns (lane = column; lanes past vec_size
// return 0). Each group of 32 entries is loaded at once: P lanes an entry (P >= vec_size, a power
// of two), 32 / P entries a load, P loads a lane, all in flight together; the values go through
// the warp's tile, and each column's lane adds them in entry order from 0, with the separately
// rounded multiply and add of Lanes::add_scaled, so the sum is bitwise sum_entries'. The loads
// bypass L1 (ldcg1): a gradient row is read once, and with 1024 rows a SM in flight, L1's
// allocations made the same kernel slower than sum_entries (bench_embedding section (f), H200:
// 0.167 against 0.151 ms at width 11; through L2 alone 0.113 ms).
template <int P, class G>
__device__ float sum_entries_narrow(const std::int32_t* __restrict__ bags,
                                    const float* __restrict__ scale, const G* __restrict__ grad,
                                    std::int64_t vec_size, std::int64_t first, std::int64_t last,
                                    std::int32_t first_bag, float first_scale, int lane,
                                    NarrowTile& tile) {
  static_assert(P >= 1 && P <= kNarrowColumns && (P & (P - 1)) == 0);
  constexpr int kEntriesPerLoad = 32 / P;
  const int column = lane % P;
  const int sub = lane / P;
  float g = 0.f;
  for (std::int64_t base = first; base < last; base += 32) {
    const int m = static_cast<int>(last - base < 32 ? last - base : 32);
    LaneEntry mine = lane_entry(bags, base, first, m, lane, first_bag, first_scale);
    load_scale(mine, scale, m, lane);
    float v[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int j = k * kEntriesPerLoad + sub;
      const int b = __shfl_sync(0xffffffffu, mine.bag, j);
      v[k] = j < m && column < vec_size
                 ? ldcg1(grad + static_cast<std::int64_t>(b) * vec_size + column)
                 : 0.f;
    }
    __syncwarp();  // the last group's sums are done with the tile
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int j = k * kEntriesPerLoad + sub;
      if (j < m && column < vec_size) tile.values[j * kTileStride + column] = v[k];
    }
    tile.scales[lane] = mine.scale;
    __syncwarp();
    if (lane < vec_size) {
      for (int j = 0; j < m; ++j)
        g = __fadd_rn(g, __fmul_rn(tile.values[j * kTileStride + lane], tile.scales[j]));
    }
  }
  return g;
}

// One optimizer step on row r: the gradient of each 128- (or 32-) column pass comes from
// `sum(c, active)`, then weight and state are read, stepped and written once. The row's weight
// and state lines are prefetched into L2 before the sum, so their latency overlaps it without
// holding registers across it (registers are what limits how many warps, and so how many row
// loads, an SM keeps in flight). Every lane of the warp must call it.
template <int W, class V, class GradientSum>
__device__ void step_row(std::int64_t r, const GradientSum& sum, const Values& values,
                         const UpdateRounding<V>& rounder, std::int64_t vec_size,
                         const RowStates& st, std::int64_t step, const optim::UpdateStep& u,
                         int lane) {
  using L = Lanes<W>;
  V* const weights = static_cast<V*>(values.data);
  for (std::int64_t c = W * lane; c - W * lane < vec_size; c += L::kColumns) {
    const bool active = c < vec_size;
    const std::int64_t at = r * vec_size + c;
    if (active && c % 32 == 0) {  // one lane per 32 columns (a 128-byte line of a dim-128 row)
      prefetch_l2(weights + at);
      if (st.s0) prefetch_l2(st.s0 + at);
      if (st.s1) prefetch_l2(st.s1 + at);
    }
    typename L::T g = sum(c, active);
    if (active) {
      typename L::T w = L::load_values(weights + at);
      typename L::T s0 = st.s0 ? L::load(st.s0 + at) : L::zero();
      typename L::T s1 = st.s1 ? L::load(st.s1 + at) : L::zero();
      V out[W];
#pragma unroll
      for (int i = 0; i < W; ++i) {
        const float before = L::at(w, i);
        float x = before;
        optim::apply_update(u, x, L::at(g, i), L::at(s0, i), L::at(s1, i));
        out[i] = rounder(c + i, x, before);
      }
      L::store_values(weights + at, out);
      if (st.s0) L::store(st.s0 + at, s0);
      if (st.s1) L::store(st.s1 + at, s1);
    }
  }
  __syncwarp();
  if (lane == 0 && st.last_step != nullptr) st.last_step[r] = step;
}

// A chunk of a hot row: sorted entries [begin, end). Its partial sum goes to partial row `item`
// (its index in the plan); the row's chunks are items first .. first + chunks - 1.
struct HotChunk {
  std::int32_t begin, end;
  std::int32_t first, chunks;
  std::int64_t row;
  std::int64_t unused;
};
static_assert(sizeof(HotChunk) == 32);

// Distinct row k's entries [first, first + count) and its first entry's bag and scale, in one
// 16-byte load: a row with one entry (most rows under power-law keys) then needs no dependent
// load before its gradient row.
struct RowEntries {
  std::int32_t first, count, first_bag;
  float first_scale;
};
static_assert(sizeof(RowEntries) == 16);

struct UpdatePlan {
  const RowEntries* rows = nullptr;  // [distinct rows]
  const HotChunk* hot = nullptr;
  const int* hot_count = nullptr;
  int* arrivals = nullptr;    // per hot row (at its first item): chunks finished
  float* partials = nullptr;  // [hot items, vec_size]
};

// A thread per distinct row: its RowEntries; rows of more than kGradientChunk entries also get
// their chunks listed (consecutive items, taken with one atomic per row) and their arrival
// counter reset.
__global__ void plan_kernel(Segments seg, const float* __restrict__ scale,
                            RowEntries* __restrict__ rows, HotChunk* __restrict__ hot,
                            int* __restrict__ hot_count, int* __restrict__ arrivals) {
  const std::int64_t count = *seg.count;
  for (std::int64_t k = global_thread(); k < count; k += thread_count()) {
    const std::int64_t r = seg.unique_rows[k];
    const std::int64_t begin = seg.offsets[k], end = seg.offsets[k + 1];
    RowEntries e;
    e.first = static_cast<std::int32_t>(begin);
    e.count = static_cast<std::int32_t>(end - begin);
    e.first_bag = seg.sorted_bags[begin];
    e.first_scale = scale != nullptr ? scale[e.first_bag] : 1.f;
    rows[k] = e;
    if (r < 0 || end - begin <= kGradientChunk) continue;
    const int chunks = static_cast<int>((end - begin + kGradientChunk - 1) / kGradientChunk);
    const int first = atomicAdd(hot_count, chunks);
    arrivals[first] = 0;
    for (int j = 0; j < chunks; ++j) {
      HotChunk h;
      h.begin = static_cast<std::int32_t>(begin + j * kGradientChunk);
      h.end = static_cast<std::int32_t>(min(end, begin + (j + 1) * kGradientChunk));
      h.first = first;
      h.chunks = chunks;
      h.row = r;
      h.unused = 0;
      hot[first + j] = h;
    }
  }
}

// The sum from zero, in chunk order, of a hot row's `chunks` partial sums (rows of `partials`,
// read from L2), for this lane's columns c .. c + W - 1.
template <int W>
__device__ __forceinline__ typename Lanes<W>::T sum_partials(const float* partials, int chunks,
                                                             std::int64_t vec_size, std::int64_t c,
                                                             bool active) {
  using L = Lanes<W>;
  typename L::T g = L::zero();
  for (int j = 0; j < chunks; j += kPartialsInFlight) {
    typename L::T p[kPartialsInFlight];
    if (active) {
#pragma unroll
      for (int q = 0; q < kPartialsInFlight; ++q) {
        if (j + q < chunks) p[q] = L::load_l2(partials + (j + q) * vec_size + c);
      }
#pragma unroll
      for (int q = 0; q < kPartialsInFlight; ++q) {
        if (j + q < chunks) L::add(g, p[q]);
      }
    }
  }
  return g;
}

// 4 blocks of 256 threads per SM (64 registers a thread; -Xptxas -v reports one 8-byte spill for
// the 16-byte variant, none for the scalar one): 32 warps, each with up to kLoadsInFlight
// 16-byte row loads outstanding.
constexpr int kUpdateBlocksPerSm = 4;

// Work items, a warp each, strided over a persistent grid: first the chunks of hot rows (the
// long items, so the short ones fill in behind them), then every distinct row, of which the
// cold ones (at most kGradientChunk entries) are updated whole and the hot ones skipped (their
// last chunk to finish updates them). Sums follow the kGradientChunk order exactly.
// P > 0: rows of at most kNarrowColumns columns, summed by sum_entries_narrow<P> (W = 1).
template <int W, int P, class V, class G>
__global__ void __launch_bounds__(kThreads, kUpdateBlocksPerSm)
    update_kernel(Segments seg, UpdatePlan plan, const float* __restrict__ scale,
                  const G* __restrict__ grad, Values values, std::int64_t vec_size, RowStates st,
                  std::int64_t step, optim::UpdateStep u) {
  static_assert(P == 0 || W == 1);
  using L = Lanes<W>;
  constexpr bool kPrefetch = prefetch_gradient_rows<V, G>();
  const int lane = threadIdx.x & 31;
  const UpdateRounding<V> rounder(values, step);
  NarrowTile* tile = nullptr;
  if constexpr (P > 0) {
    __shared__ NarrowTile tiles[kThreads / 32];
    tile = &tiles[threadIdx.x / 32];
  }
  // The sum of entries [first, last) for this lane's columns c .. c + W - 1.
  auto entries = [&](std::int64_t c, bool active, std::int64_t first, std::int64_t last,
                     std::int32_t first_bag, float first_scale) {
    if constexpr (P > 0) {
      return sum_entries_narrow<P, G>(seg.sorted_bags, scale, grad, vec_size, first, last,
                                      first_bag, first_scale, lane, *tile);
    } else {
      return sum_entries<W, G, kPrefetch>(seg.sorted_bags, scale, grad, vec_size, c, active, first,
                                          last, first_bag, first_scale, lane);
    }
  };
  const std::int64_t hot_count = *plan.hot_count;
  const std::int64_t items = hot_count + *seg.count;
  for (std::int64_t item = global_warp(); item < items; item += warp_count()) {
    if (item < hot_count) {
      const HotChunk h = plan.hot[item];
      for (std::int64_t c = W * lane; c - W * lane < vec_size; c += L::kColumns) {
        const bool active = c < vec_size;
        const typename L::T p = entries(c, active, h.begin, h.end, -1, 0.f);
        if (active) L::store_l2(plan.partials + item * vec_size + c, p);
      }
      // Publish the partial sum, then count the chunk in; the warp that brings the count to
      // `chunks` sees every partial of the row and finishes it (the last-block pattern).
      __threadfence();
      __syncwarp();
      int last = 0;
      if (lane == 0) {
        __threadfence();
        last = atomicAdd(&plan.arrivals[h.first], 1) == h.chunks - 1;
      }
      last = __shfl_sync(0xffffffffu, last, 0);
      if (!last) continue;
      __threadfence();
      const float* partials = plan.partials + static_cast<std::int64_t>(h.first) * vec_size;
      const int chunks = h.chunks;
      step_row<W, V>(
          h.row,
          [&](std::int64_t c, bool active) {
            return sum_partials<W>(partials, chunks, vec_size, c, active);
          },
          values, rounder, vec_size, st, step, u, lane);
    } else {
      const std::int64_t k = item - hot_count;
      const RowEntries e = plan.rows[k];
      const std::int64_t r = seg.unique_rows[k];
      if (r < 0 || e.count > kGradientChunk) continue;
      step_row<W, V>(
          r,
          [&](std::int64_t c, bool active) {
            return entries(c, active, e.first, static_cast<std::int64_t>(e.first) + e.count,
                           e.first_bag, e.first_scale);
          },
          values, rounder, vec_size, st, step, u, lane);
    }
  }
}

// Global's zero-gradient step of one weight and its states, the one code that both the per-step
// pass over untouched rows and the replay of missed steps (host-backed tables) run, so that the
// two agree bitwise.
__device__ __forceinline__ void zero_gradient_step(const optim::UpdateStep& u, float& w, float& s0,
                                                   float& s1) {
  optim::apply_update(u, w, 0.0f, s0, s1);
}

template <class V>
__global__ void untouched_kernel(std::int64_t bound, const std::int64_t* __restrict__ rows_in_use,
                                 Values values, std::int64_t vec_size, RowStates st,
                                 std::int64_t step, optim::UpdateStep u) {
  const int lane = threadIdx.x & 31;
  const UpdateRounding<V> rounder(values, step);
  const std::int64_t rows = rows_in_use == nullptr ? bound : min(bound, *rows_in_use);
  for (std::int64_t r = global_warp(); r < rows; r += warp_count()) {
    if (st.last_step[r] == step) continue;
    V* w = static_cast<V*>(values.data) + r * vec_size;
    float* s0 = row_ptr(st.s0, r, vec_size);
    float* s1 = row_ptr(st.s1, r, vec_size);
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      const float before = static_cast<float>(w[c]);
      float wc = before;
      float d0 = s0 ? s0[c] : 0.f, d1 = s1 ? s1[c] : 0.f;
      zero_gradient_step(u, wc, d0, d1);
      w[c] = rounder(c, wc, before);
      if (s0) s0[c] = d0;
      if (s1) s1[c] = d1;
    }
    __syncwarp();
    if (lane == 0) st.last_step[r] = step;
  }
}

// A warp per row: each weight and its states take the missed steps in order, held in registers.
__global__ void replay_kernel(const std::int64_t* __restrict__ slots, std::int64_t count,
                              float* __restrict__ values, std::int64_t vec_size, RowStates st,
                              std::int64_t target, const optim::UpdateStep* __restrict__ steps) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t i = global_warp(); i < count; i += warp_count()) {
    const std::int64_t r = slots == nullptr ? i : slots[i];
    const std::int64_t from = st.last_step[r];
    if (from >= target) continue;
    float* w = values + r * vec_size;
    float* s0 = row_ptr(st.s0, r, vec_size);
    float* s1 = row_ptr(st.s1, r, vec_size);
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      float wc = w[c];
      float d0 = s0 ? s0[c] : 0.f, d1 = s1 ? s1[c] : 0.f;
      for (std::int64_t s = from + 1; s <= target; ++s) {
        const optim::UpdateStep u = steps[s - 1];
        zero_gradient_step(u, wc, d0, d1);
      }
      w[c] = wc;
      if (s0) s0[c] = d0;
      if (s1) s1[c] = d1;
    }
    __syncwarp();
    if (lane == 0) st.last_step[r] = target;
  }
}

}  // namespace

void update_rows(const Segments& seg, const float* scale, const void* grad, ValueType grad_type,
                 const Values& values, std::int64_t vec_size, RowStates states, std::int64_t step,
                 const optim::UpdateStep& u, const LazyParams* lazy, StreamHandle stream) {
  const std::int64_t n = seg.entries;
  if (n == 0 || vec_size == 0) return;
  EMBER_CHECK(n < INT_MAX, "embedding batch of ", n, " keys on one rank exceeds 2^31 - 1");
  // A hot row has more than kGradientChunk entries, so its ceil(len / kGradientChunk) chunks
  // are fewer than 2 len / kGradientChunk: all hot chunks together fewer than 2n / kGradientChunk.
  const std::int64_t hot_bound = 2 * n / kGradientChunk + 1;
  Temp rows(n * sizeof(RowEntries), stream);
  Temp hot(hot_bound * sizeof(HotChunk), stream), hot_count(sizeof(int), stream);
  Temp arrivals(hot_bound * sizeof(int), stream);
  Temp partials(hot_bound * vec_size * sizeof(float), stream);
  EMBER_CUDA_CHECK(cudaMemsetAsync(hot_count.as<int>(), 0, sizeof(int), stream));
  plan_kernel<<<blocks_for_threads(n), kThreads, 0, stream>>>(
      seg, scale, rows.as<RowEntries>(), hot.as<HotChunk>(), hot_count.as<int>(),
      arrivals.as<int>());
  EMBER_CUDA_CHECK_LAUNCH();
  const UpdatePlan plan{rows.as<RowEntries>(), hot.as<HotChunk>(), hot_count.as<int>(),
                        arrivals.as<int>(), partials.as<float>()};
  auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (lazy != nullptr) {
    // LazyGlobal: the batch's rows are first brought to step - 1 (the training forward has
    // usually done so already; then this only reads last_step), so the update kernel itself
    // carries no catch-up code and stays within its register budget.
    catch_up_rows(seg.unique_rows, n, seg.count, values, vec_size, states, step - 1, *lazy, stream);
  }
  // A persistent grid: items go out in order, so the hot chunks (the first items) finish early
  // and the last warp of each hot row adds its partial sums while the cold rows still run.
  const std::int64_t items = n + hot_bound;
  // The output gradient's type is a template argument: a 16-bit gradient (mixed precision) is
  // read as it is, half the bytes of an f32 copy, and widened in registers.
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    with_value_type(grad_type, [&](auto grad_tag) {
      using G = decltype(grad_tag);
      const G* g = static_cast<const G*>(grad);
      auto launch = [&](auto kernel) {
        kernel<<<persistent_blocks(kernel, items), kThreads, 0, stream>>>(
            seg, plan, scale, g, values, vec_size, states, step, u);
      };
      if (vec_size == 1) {
        launch(update_kernel<1, 1, V, G>);
      } else if (vec_size <= kNarrowColumns) {
        launch(update_kernel<1, kNarrowColumns, V, G>);
      } else if (vec_size % 4 == 0 && aligned4<V>(values.data) && aligned4<G>(g) &&
                 aligned(states.s0) && aligned(states.s1)) {
        launch(update_kernel<4, 0, V, G>);
      } else {
        launch(update_kernel<1, 0, V, G>);
      }
    });
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

void update_untouched(std::int64_t bound, const std::int64_t* rows_in_use, const Values& values,
                      std::int64_t vec_size, RowStates states, std::int64_t step,
                      const optim::UpdateStep& u, StreamHandle stream) {
  if (bound <= 0) return;
  with_value_type(values.type, [&](auto tag) {
    untouched_kernel<decltype(tag)><<<blocks_for_warps(bound), kThreads, 0, stream>>>(
        bound, rows_in_use, values, vec_size, states, step, u);
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

void replay_steps(const std::int64_t* slots, std::int64_t count, float* values,
                  std::int64_t vec_size, RowStates states, std::int64_t target,
                  const optim::UpdateStep* steps, StreamHandle stream) {
  if (count <= 0) return;
  replay_kernel<<<blocks_for_warps(count), kThreads, 0, stream>>>(slots, count, values, vec_size,
                                                                  states, target, steps);
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::embedding::kernels::cuda
