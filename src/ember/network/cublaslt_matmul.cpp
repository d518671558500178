#include "ember/network/cublaslt_matmul.hpp"

#include <atomic>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/per_device.hpp"
#include "ember/network/launch_timing.hpp"
#include "ember/network/measurement_cache.hpp"

#if EMBER_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "ember/core/allocation.hpp"
#include "ember/core/place.hpp"
#include "ember/core/stream.hpp"
#endif

namespace ember::network::cuda {

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::None:
      return "none";
    case Epilogue::Bias:
      return "bias";
    case Epilogue::ReluBias:
      return "relu+bias";
    case Epilogue::ReluAuxBias:
      return "relu+bias+mask";
    case Epilogue::BiasGradA:
      return "bias-gradient";
    case Epilogue::Drelu:
      return "relu-gradient";
  }
  return "?";
}

namespace {
std::atomic<std::int64_t> g_searched{0};
}  // namespace

std::int64_t searched_product_count() {
  return g_searched.load();
}

#if EMBER_WITH_CUDA

namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;

struct DeviceLt {
  cublasLtHandle_t handle = nullptr;
  AllocationPtr workspace;
};

DeviceLt& device_lt(int device) {
  static PerDevice<DeviceLt> state([](int d) {
    DeviceGuard guard(d);
    auto s = std::make_unique<DeviceLt>();
    EMBER_CUBLAS_CHECK(cublasLtCreate(&s->handle));
    s->workspace = Allocation::create(Place::cuda(d), kWorkspaceBytes);
    return s;
  });
  return state.get(device);
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
    default:
      EMBER_THROW("cuBLASLt matmul: unsupported dtype ", dtype_name(t));
  }
}

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::None:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::Bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::ReluBias:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::ReluAuxBias:
      return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case Epilogue::BiasGradA:
      return CUBLASLT_EPILOGUE_BGRADA;
    case Epilogue::Drelu:
      return CUBLASLT_EPILOGUE_DRELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool uses_bias(Epilogue e) {
  return e == Epilogue::Bias || e == Epilogue::ReluBias || e == Epilogue::ReluAuxBias ||
         e == Epilogue::BiasGradA;
}
bool uses_aux(Epilogue e) {
  return e == Epilogue::ReluAuxBias || e == Epilogue::Drelu;
}
// The epilogue writes through the bias / aux pointer (rather than reading it).
bool writes_bias(Epilogue e) {
  return e == Epilogue::BiasGradA;
}
bool writes_aux(Epilogue e) {
  return e == Epilogue::ReluAuxBias;
}

// Largest power of two (up to 256) dividing the address: what the pointer guarantees.
std::uint32_t alignment_of(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && (v % a) != 0)
    a /= 2;
  return a;
}

// A searched (or unsupported) problem, remembered for the process.
struct CachedChoice {
  bool supported = false;
  cublasLtMatmulAlgo_t algo{};
  double ms = 0.0;
  int index = 0, count = 0;
};
MeasurementCache<CachedChoice>& choices() {
  static MeasurementCache<CachedChoice> c;
  return c;
}

// What the pointers of A, B and D guarantee (alignment_of each).
struct Alignments {
  std::uint32_t a = 0, b = 0, d = 0;
};

std::string cache_key(const MatmulProblem& p, int device, const Alignments& align) {
  std::ostringstream k;
  k << "dev" << device << " t" << p.transpose_a << p.transpose_b << " mnk" << p.m << ',' << p.n
    << ',' << p.k << " ld" << p.lda << ',' << p.ldb << ',' << p.ldd << " dt"
    << dtype_name(p.ab_dtype) << ',' << dtype_name(p.d_dtype) << " tf32 " << p.allow_tf32 << " epi "
    << epilogue_name(p.epilogue) << " aux " << p.aux_ld << " align " << align.a << ',' << align.b
    << ',' << align.d;
  return k.str();
}

// The index of the fastest candidate (the first of equals).
int fastest(const std::vector<double>& ms) {
  int chosen = 0;
  for (std::size_t i = 1; i < ms.size(); ++i) {
    if (ms[i] < ms[static_cast<std::size_t>(chosen)]) chosen = static_cast<int>(i);
  }
  return chosen;
}

std::size_t round_up(std::size_t v, std::size_t a) {
  return (v + a - 1) / a * a;
}

// One configuration field of an algorithm (0 when cuBLASLt does not report it).
std::uint32_t algo_field(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t a) {
  std::uint32_t v = 0;
  std::size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS) {
    return 0;
  }
  return v;
}

// What a plan runs, for EMBER_LOG_LEVEL=debug: split-K and its reduction scheme decide whether
// the product's sums depend on more than the algorithm (run-to-run reproducibility); with a
// search, the chosen candidate's time and the heuristics' first's.
void log_choice(const MatmulProblem& p, const cublasLtMatmulAlgo_t& algo, int chosen,
                int candidates, double ms, double first_ms) {
  EMBER_LOG_DEBUG(
      "cuBLASLt plan m={} n={} k={} t{}{} ab {} d {} epilogue {}: candidate {} of {} ({:.4f} ms; "
      "the heuristics' first {:.4f} ms), algo {} tile {} stages {} split-K {} reduction scheme {}",
      p.m, p.n, p.k, p.transpose_a ? 1 : 0, p.transpose_b ? 1 : 0, dtype_name(p.ab_dtype),
      dtype_name(p.d_dtype), epilogue_name(p.epilogue), chosen, candidates, ms, first_ms,
      algo_field(algo, CUBLASLT_ALGO_CONFIG_ID), algo_field(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
      algo_field(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
      algo_field(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
      algo_field(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
}

}  // namespace

struct LtMatmul::Impl {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};
  mutable const void* bias = nullptr;
  mutable const void* aux = nullptr;

  ~Impl() {
    if (pref != nullptr) (void)cublasLtMatmulPreferenceDestroy(pref);
    if (layout_d != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_d);
    if (layout_b != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_b);
    if (layout_a != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_a);
    if (op != nullptr) (void)cublasLtMatmulDescDestroy(op);
  }

  void set_bias(const void* p) const {
    EMBER_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof(p)));
    bias = p;
  }
  void set_aux(const void* p) const {
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                      &p, sizeof(p)));
    aux = p;
  }

  // The operation descriptor (compute type, transposes, epilogue and its pointers) and the
  // layouts of A, B and D.
  void describe(const MatmulProblem& p, const void* bias_in, const void* aux_in);
  // What the heuristics may offer: the workspace, the pointers' alignments and, for 16-bit
  // outputs, split-K reductions in f32 only.
  void set_preferences(const MatmulProblem& p, const Alignments& align);
  // Up to `wanted` algorithms from the heuristics that can run; none when cuBLASLt has no
  // algorithm for this combination (anything else that fails is a real error).
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(DeviceLt& lt, int wanted) const;

  // Times every candidate on `stream`; A and B (and read-only bias/aux) come from the caller's
  // pointers, D and any epilogue output go to scratch memory. Returns the times (infinity for a
  // candidate that fails to launch); an empty vector when scratch memory could not be had.
  std::vector<double> time_candidates(const MatmulProblem& p, int device, DeviceLt& lt,
                                      const std::vector<cublasLtMatmulHeuristicResult_t>& cands,
                                      const void* a, const void* b, const void* bias_in,
                                      const void* aux_in, StreamHandle stream) const;
};

LtMatmul::~LtMatmul() = default;

std::vector<double> LtMatmul::Impl::time_candidates(
    const MatmulProblem& p, int device, DeviceLt& lt,
    const std::vector<cublasLtMatmulHeuristicResult_t>& cands, const void* a, const void* b,
    const void* bias_in, const void* aux_in, StreamHandle stream) const {
  const std::size_t d_bytes =
      static_cast<std::size_t>(p.ldd) * static_cast<std::size_t>(p.n) * dtype_size(p.d_dtype);
  const std::size_t aux_bytes =
      writes_aux(p.epilogue) ? static_cast<std::size_t>(p.aux_ld / 8 * p.n) : 0;
  const std::size_t bias_bytes =
      writes_bias(p.epilogue) ? static_cast<std::size_t>(p.m) * dtype_size(p.d_dtype) : 0;
  const std::size_t aux_offset = round_up(d_bytes, 256);
  const std::size_t bias_offset = aux_offset + round_up(aux_bytes, 256);
  AllocationPtr scratch;
  try {
    scratch = Allocation::create(Place::cuda(device), bias_offset + round_up(bias_bytes, 256));
  } catch (const std::exception&) {
    return {};  // no room to time: the caller keeps the heuristics' first choice
  }
  void* d_scratch = scratch->bytes();
  const void* bias_ptr = writes_bias(p.epilogue) ? scratch->bytes() + bias_offset : bias_in;
  const void* aux_ptr = writes_aux(p.epilogue) ? scratch->bytes() + aux_offset : aux_in;
  if (uses_bias(p.epilogue)) set_bias(bias_ptr);
  if (uses_aux(p.epilogue)) set_aux(aux_ptr);

  std::vector<double> ms(cands.size(), std::numeric_limits<double>::infinity());
  const float alpha = 1.0f, beta = 0.0f;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    const cublasLtMatmulAlgo_t* algo = &cands[i].algo;
    // A candidate that cannot launch is skipped, not fatal: the heuristics offered it, the
    // others still can.
    if (cublasLtMatmul(lt.handle, op, &alpha, a, layout_a, b, layout_b, &beta, d_scratch, layout_d,
                       d_scratch, layout_d, algo, lt.workspace->data(), kWorkspaceBytes,
                       stream) != CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    ms[i] = time_launch_ms(device, stream, [&] {
      EMBER_CUBLAS_CHECK(cublasLtMatmul(lt.handle, op, &alpha, a, layout_a, b, layout_b, &beta,
                                        d_scratch, layout_d, d_scratch, layout_d, algo,
                                        lt.workspace->data(), kWorkspaceBytes, stream));
    });
  }
  synchronize_stream(stream);  // before the scratch memory goes back
  return ms;
}

void LtMatmul::Impl::describe(const MatmulProblem& p, const void* bias_in, const void* aux_in) {
  const cublasComputeType_t compute = (p.ab_dtype == DType::F32 && p.allow_tf32)
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
  const cublasOperation_t ta = p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  EMBER_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  EMBER_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const cublasLtEpilogue_t epi = lt_epilogue(p.epilogue);
  EMBER_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (uses_bias(p.epilogue)) set_bias(bias_in);
  if (uses_aux(p.epilogue)) {
    set_aux(aux_in);
    const std::int64_t ld = p.aux_ld;
    EMBER_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
  }
  const cudaDataType_t ab = data_type(p.ab_dtype), dd = data_type(p.d_dtype);
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_a, ab, p.transpose_a ? p.k : p.m,
                                                p.transpose_a ? p.m : p.k, p.lda));
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_b, ab, p.transpose_b ? p.n : p.k,
                                                p.transpose_b ? p.k : p.n, p.ldb));
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_d, dd, p.m, p.n, p.ldd));
}

void LtMatmul::Impl::set_preferences(const MatmulProblem& p, const Alignments& align) {
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t ws = kWorkspaceBytes;
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align.a, sizeof(align.a)));
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align.b, sizeof(align.b)));
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align.d, sizeof(align.d)));
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align.d, sizeof(align.d)));
  if (p.d_dtype == DType::F16 || p.d_dtype == DType::BF16) {
    // Split-K partial sums added up in the output type (the in-place and output-type schemes)
    // round a 16-bit result once per split instead of once; only schemes that add up in the
    // compute type (f32) are offered, so every candidate meets the one-rounding tolerance.
    const std::uint32_t schemes =
        CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes)));
  }
}

std::vector<cublasLtMatmulHeuristicResult_t> LtMatmul::Impl::candidates(DeviceLt& lt,
                                                                        int wanted) const {
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(wanted));
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      lt.handle, op, layout_a, layout_b, layout_d, layout_d, pref, wanted, results.data(), &found);
  // NOT_SUPPORTED (or no result) means "no algorithm for this combination": the caller falls
  // back. Anything else is a real error.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) EMBER_CUBLAS_CHECK(status);
  std::vector<cublasLtMatmulHeuristicResult_t> usable;
  if (status == CUBLAS_STATUS_SUCCESS) {
    for (int i = 0; i < found; ++i) {
      if (results[static_cast<std::size_t>(i)].state == CUBLAS_STATUS_SUCCESS) {
        usable.push_back(results[static_cast<std::size_t>(i)]);
      }
    }
  }
  return usable;
}

namespace {
void check_problem(const MatmulProblem& p, const void* bias, const void* aux) {
  EMBER_CHECK(p.m > 0 && p.n > 0 && p.k > 0, "cuBLASLt plan: empty problem ", p.m, "x", p.n, "x",
              p.k);
  EMBER_CHECK(p.m <= INT32_MAX && p.n <= INT32_MAX && p.k <= INT32_MAX,
              "cuBLASLt plan: dimensions exceed 32 bits");
  EMBER_CHECK(!uses_bias(p.epilogue) || bias != nullptr, "cuBLASLt plan: epilogue ",
              epilogue_name(p.epilogue), " needs a bias pointer");
  EMBER_CHECK(!uses_aux(p.epilogue) || (aux != nullptr && p.aux_ld % 128 == 0 && p.aux_ld >= p.m),
              "cuBLASLt plan: epilogue ", epilogue_name(p.epilogue),
              " needs a mask pointer and a leading dimension that is a multiple of 128 and at "
              "least ",
              p.m, " (got ", p.aux_ld, ")");
}
}  // namespace

std::unique_ptr<LtMatmul> LtMatmul::plan(const MatmulProblem& p, int device, const void* a,
                                         const void* b, const void* d, const void* bias,
                                         const void* aux, const PlanRequest& request) {
  check_problem(p, bias, aux);
  std::unique_ptr<LtMatmul> plan(new LtMatmul);
  plan->problem_ = p;
  plan->device_ = device;
  plan->impl_ = std::make_unique<Impl>();
  Impl& im = *plan->impl_;
  DeviceGuard guard(device);
  DeviceLt& lt = device_lt(device);
  im.describe(p, bias, aux);
  const Alignments align{alignment_of(a), alignment_of(b), alignment_of(d)};
  im.set_preferences(p, align);

  const bool forced = request.force_candidate >= 0;
  const bool search = request.search && !forced;
  const std::string key = search ? cache_key(p, device, align) : std::string();
  if (search) {
    if (const std::optional<CachedChoice> c = choices().find(key)) {
      plan->supported_ = c->supported;
      im.algo = c->algo;
      plan->time_ms_ = c->ms;
      plan->chosen_ = c->index;
      plan->candidates_ = c->count;
      return plan;
    }
  }
  const std::vector<cublasLtMatmulHeuristicResult_t> usable =
      im.candidates(lt, (search || forced) ? kSearchCandidates : 1);
  plan->candidates_ = static_cast<int>(usable.size());
  plan->supported_ = !usable.empty();
  if (!plan->supported_) {
    if (search) choices().remember(key, CachedChoice{});
    return plan;
  }

  int chosen = 0;
  double first_ms = std::numeric_limits<double>::quiet_NaN();
  if (forced) {
    chosen = std::min(request.force_candidate, plan->candidates_ - 1);
  } else if (search && a != nullptr && b != nullptr) {
    const StreamHandle stream = request.stream != nullptr ? request.stream : current_stream(device);
    const std::vector<double> ms =
        im.time_candidates(p, device, lt, usable, a, b, bias, aux, stream);
    // The real pointers go back into the descriptor whatever the timing did.
    if (uses_bias(p.epilogue)) im.set_bias(bias);
    if (uses_aux(p.epilogue)) im.set_aux(aux);
    if (!ms.empty()) {
      ++g_searched;
      chosen = fastest(ms);
      if (ms[static_cast<std::size_t>(chosen)] == std::numeric_limits<double>::infinity()) {
        // No candidate launched: report the product as unsupported (the caller falls back)
        // rather than keep an algorithm that fails.
        plan->supported_ = false;
        choices().remember(key, CachedChoice{});
        return plan;
      }
      plan->time_ms_ = ms[static_cast<std::size_t>(chosen)];
      first_ms = ms.front();
    }
  }
  im.algo = usable[static_cast<std::size_t>(chosen)].algo;
  plan->chosen_ = chosen;
  log_choice(p, im.algo, chosen, plan->candidates_, plan->time_ms_, first_ms);
  if (search && !std::isnan(plan->time_ms_)) {
    choices().remember(key, CachedChoice{true, im.algo, plan->time_ms_, chosen, plan->candidates_});
  }
  return plan;
}

void LtMatmul::run(const void* a, const void* b, void* d, const void* bias, void* aux, float alpha,
                   float beta, StreamHandle stream) const {
  EMBER_CHECK(supported_, "cuBLASLt: running an unsupported plan (epilogue ",
              epilogue_name(problem_.epilogue), ")");
  Impl& im = *impl_;
  DeviceGuard guard(device_);
  DeviceLt& lt = device_lt(device_);
  if (uses_bias(problem_.epilogue) && bias != im.bias) im.set_bias(bias);
  if (uses_aux(problem_.epilogue) && aux != im.aux) im.set_aux(aux);
  EMBER_CUBLAS_CHECK(cublasLtMatmul(lt.handle, im.op, &alpha, a, im.layout_a, b, im.layout_b, &beta,
                                    d, im.layout_d, d, im.layout_d, &im.algo, lt.workspace->data(),
                                    kWorkspaceBytes, stream));
}

void clear_algorithm_cache() {
  choices().clear();
  clear_launch_timings();
}

#else  // !EMBER_WITH_CUDA

struct LtMatmul::Impl {};
LtMatmul::~LtMatmul() = default;
std::unique_ptr<LtMatmul> LtMatmul::plan(const MatmulProblem&, int, const void*, const void*,
                                         const void*, const void*, const void*,
                                         const PlanRequest&) {
  throw_cuda_unavailable("cuBLASLt matmul");
}
void LtMatmul::run(const void*, const void*, void*, const void*, void*, float, float,
                   StreamHandle) const {
  throw_cuda_unavailable("cuBLASLt matmul");
}
void clear_algorithm_cache() {
  clear_launch_timings();
}

#endif

}  // namespace ember::network::cuda
