#include "ember/network/cublaslt_matmul.hpp"

#include "ember/core/error.hpp"

#if EMBER_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <mutex>

#include "ember/core/allocation.hpp"
#include "ember/core/place.hpp"
#endif

namespace ember::nn::cuda {

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::None: return "none";
    case Epilogue::Bias: return "bias";
    case Epilogue::ReluBias: return "relu+bias";
    case Epilogue::ReluAuxBias: return "relu+bias+mask";
    case Epilogue::BiasGradA: return "bias-gradient";
    case Epilogue::Drelu: return "relu-gradient";
  }
  return "?";
}

#if EMBER_WITH_CUDA

namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;
constexpr int kMaxDevices = 64;

struct DeviceLt {
  cublasLtHandle_t handle = nullptr;
  AllocationPtr workspace;
};

// Created on first use and never destroyed (no teardown during static destruction, after the
// CUDA runtime may be gone).
DeviceLt& device_lt(int device) {
  EMBER_CHECK(device >= 0 && device < kMaxDevices, "cuBLASLt: device ", device, " out of range");
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<DeviceLt*, kMaxDevices> state{};
  std::call_once(once[static_cast<std::size_t>(device)], [device] {
    DeviceGuard guard(device);
    auto* s = new DeviceLt;
    EMBER_CUBLAS_CHECK(cublasLtCreate(&s->handle));
    s->workspace = Allocation::create(Place::cuda(device), kWorkspaceBytes);
    state[static_cast<std::size_t>(device)] = s;
  });
  return *state[static_cast<std::size_t>(device)];
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: EMBER_THROW("cuBLASLt matmul: unsupported dtype ", dtype_name(t));
  }
}

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::ReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::ReluAuxBias: return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case Epilogue::BiasGradA: return CUBLASLT_EPILOGUE_BGRADA;
    case Epilogue::Drelu: return CUBLASLT_EPILOGUE_DRELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool uses_bias(Epilogue e) {
  return e == Epilogue::Bias || e == Epilogue::ReluBias || e == Epilogue::ReluAuxBias ||
         e == Epilogue::BiasGradA;
}
bool uses_aux(Epilogue e) { return e == Epilogue::ReluAuxBias || e == Epilogue::Drelu; }

// Largest power of two (up to 256) dividing the address: what the pointer guarantees.
std::uint32_t alignment_of(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && (v % a) != 0) a /= 2;
  return a;
}

}  // namespace

struct LtMatmul::Impl {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};
  mutable const void* bias = nullptr;
  mutable const void* aux = nullptr;

  ~Impl() {
    if (pref != nullptr) (void)cublasLtMatmulPreferenceDestroy(pref);
    if (d != nullptr) (void)cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) (void)cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) (void)cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) (void)cublasLtMatmulDescDestroy(op);
  }
};

LtMatmul::~LtMatmul() = default;

std::unique_ptr<LtMatmul> LtMatmul::plan(const MatmulProblem& p, int device, const void* a,
                                         const void* b, const void* d, const void* bias,
                                         const void* aux) {
  EMBER_CHECK(p.m > 0 && p.n > 0 && p.k > 0, "cuBLASLt plan: empty problem ", p.m, "x", p.n, "x",
              p.k);
  EMBER_CHECK(p.m <= INT32_MAX && p.n <= INT32_MAX && p.k <= INT32_MAX,
              "cuBLASLt plan: dimensions exceed 32 bits");
  EMBER_CHECK(!uses_bias(p.epilogue) || bias != nullptr, "cuBLASLt plan: epilogue ",
              epilogue_name(p.epilogue), " needs a bias pointer");
  EMBER_CHECK(!uses_aux(p.epilogue) || (aux != nullptr && p.aux_ld % 128 == 0 && p.aux_ld >= p.m),
              "cuBLASLt plan: epilogue ", epilogue_name(p.epilogue),
              " needs a mask pointer and a leading dimension that is a multiple of 128 and at "
              "least ", p.m, " (got ", p.aux_ld, ")");
  std::unique_ptr<LtMatmul> plan(new LtMatmul);
  plan->problem_ = p;
  plan->device_ = device;
  plan->impl_ = std::make_unique<Impl>();
  Impl& im = *plan->impl_;
  DeviceGuard guard(device);
  DeviceLt& lt = device_lt(device);

  const cublasComputeType_t compute = (p.ab_dtype == DType::F32 && p.allow_tf32)
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&im.op, compute, CUDA_R_32F));
  const cublasOperation_t ta = p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  EMBER_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  EMBER_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const cublasLtEpilogue_t epi = lt_epilogue(p.epilogue);
  EMBER_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (uses_bias(p.epilogue)) {
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &bias, sizeof(bias)));
    im.bias = bias;
  }
  if (uses_aux(p.epilogue)) {
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        im.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    const std::int64_t ld = p.aux_ld;
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                      &ld, sizeof(ld)));
    im.aux = aux;
  }
  const cudaDataType_t ab = data_type(p.ab_dtype), dd = data_type(p.d_dtype);
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&im.a, ab, p.transpose_a ? p.k : p.m,
                                                p.transpose_a ? p.m : p.k, p.lda));
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&im.b, ab, p.transpose_b ? p.n : p.k,
                                                p.transpose_b ? p.k : p.n, p.ldb));
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&im.d, dd, p.m, p.n, p.ldd));

  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&im.pref));
  const std::uint64_t ws = kWorkspaceBytes;
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      im.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const std::uint32_t align_a = alignment_of(a), align_b = alignment_of(b),
                      align_d = alignment_of(d);
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      im.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      im.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      im.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d)));
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      im.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      lt.handle, im.op, im.a, im.b, im.d, im.d, im.pref, 1, &result, &found);
  // NOT_SUPPORTED (or no result) means "no algorithm for this combination": the caller falls
  // back. Anything else is a real error.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0) ||
      (status == CUBLAS_STATUS_SUCCESS && result.state != CUBLAS_STATUS_SUCCESS)) {
    plan->supported_ = false;
    return plan;
  }
  EMBER_CUBLAS_CHECK(status);
  im.algo = result.algo;
  plan->supported_ = true;
  return plan;
}

void LtMatmul::run(const void* a, const void* b, void* d, const void* bias, void* aux,
                   float alpha, float beta, StreamHandle stream) const {
  EMBER_CHECK(supported_, "cuBLASLt: running an unsupported plan (epilogue ",
              epilogue_name(problem_.epilogue), ")");
  Impl& im = *impl_;
  DeviceGuard guard(device_);
  DeviceLt& lt = device_lt(device_);
  if (uses_bias(problem_.epilogue) && bias != im.bias) {
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &bias, sizeof(bias)));
    im.bias = bias;
  }
  if (uses_aux(problem_.epilogue) && aux != im.aux) {
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        im.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    im.aux = aux;
  }
  EMBER_CUBLAS_CHECK(cublasLtMatmul(lt.handle, im.op, &alpha, a, im.a, b, im.b, &beta, d, im.d, d,
                                    im.d, &im.algo, lt.workspace->data(), kWorkspaceBytes,
                                    stream));
}

#else  // !EMBER_WITH_CUDA

struct LtMatmul::Impl {};
LtMatmul::~LtMatmul() = default;
std::unique_ptr<LtMatmul> LtMatmul::plan(const MatmulProblem&, int, const void*, const void*,
                                         const void*, const void*, const void*) {
  throw_cuda_unavailable("cuBLASLt matmul");
}
void LtMatmul::run(const void*, const void*, void*, const void*, void*, float, float,
                   StreamHandle) const {
  throw_cuda_unavailable("cuBLASLt matmul");
}

#endif

}  // namespace ember::nn::cuda
