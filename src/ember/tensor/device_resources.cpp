#include "ember/tensor/device_resources.hpp"

#include <array>
#include <memory>
#include <mutex>

#include "ember/core/error.hpp"

#if EMBER_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <curand.h>
#endif

namespace ember {

namespace {
constexpr int kMaxDevices = 64;
}

DeviceResources& DeviceResources::get(int device) {
  require_cuda_device(device, "DeviceResources");
  static std::array<std::once_flag, kMaxDevices> once;
  // Never destroyed: library handles must not be torn down during static destruction, after the
  // CUDA runtime may already have unloaded.
  static std::array<DeviceResources*, kMaxDevices> instances{};
  EMBER_CHECK(device < kMaxDevices, "CUDA device index ", device, " is out of range");
  std::call_once(once[static_cast<std::size_t>(device)],
                 [device] { instances[static_cast<std::size_t>(device)] = new DeviceResources(device); });
  return *instances[static_cast<std::size_t>(device)];
}

#if EMBER_WITH_CUDA

namespace {
// Enables peer access between every pair of devices that supports it, once per process.
const std::vector<std::vector<bool>>& peer_matrix() {
  static const std::vector<std::vector<bool>> matrix = [] {
    const int n = cuda_device_count();
    std::vector<std::vector<bool>> m(static_cast<std::size_t>(n),
                                     std::vector<bool>(static_cast<std::size_t>(n), false));
    for (int from = 0; from < n; ++from) {
      DeviceGuard guard(from);
      for (int to = 0; to < n; ++to) {
        if (from == to) {
          m[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)] = true;
          continue;
        }
        int can = 0;
        EMBER_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
        if (can != 0) {
          const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
          if (status == cudaErrorPeerAccessAlreadyEnabled) {
            (void)cudaGetLastError();
          } else {
            EMBER_CUDA_CHECK(status);
          }
        }
        m[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)] = can != 0;
      }
    }
    return m;
  }();
  return matrix;
}
}  // namespace

DeviceResources::DeviceResources(int device) : device_(device) {
  DeviceGuard guard(device);
  copy_stream_ = Stream::create(device);
  EMBER_CUBLAS_CHECK(cublasCreate(&cublas_));
  EMBER_CURAND_CHECK(curandCreateGenerator(&curand_, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  EMBER_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(curand_, 0x5eed + static_cast<unsigned>(device)));
  (void)peer_matrix();
}

DeviceResources::~DeviceResources() {
  if (curand_ != nullptr) (void)curandDestroyGenerator(curand_);
  if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
}

StreamHandle DeviceResources::compute_stream() const { return default_stream(device_); }

void DeviceResources::set_seed(std::uint64_t seed) {
  EMBER_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(curand_, seed));
  EMBER_CURAND_CHECK(curandSetGeneratorOffset(curand_, 0));
}

bool DeviceResources::can_access_peer(int from, int to) {
  const auto& m = peer_matrix();
  EMBER_CHECK(from >= 0 && to >= 0 && from < static_cast<int>(m.size()) &&
                  to < static_cast<int>(m.size()),
              "can_access_peer(", from, ", ", to, "): only ", m.size(), " device(s)");
  return m[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
}

#else

DeviceResources::DeviceResources(int device) : device_(device) {
  throw_cuda_unavailable("DeviceResources");
}
DeviceResources::~DeviceResources() = default;
StreamHandle DeviceResources::compute_stream() const {
  throw_cuda_unavailable("DeviceResources::compute_stream");
}
void DeviceResources::set_seed(std::uint64_t) { throw_cuda_unavailable("DeviceResources::set_seed"); }
bool DeviceResources::can_access_peer(int, int) {
  throw_cuda_unavailable("DeviceResources::can_access_peer");
}

#endif

}  // namespace ember
