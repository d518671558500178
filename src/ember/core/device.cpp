#include "ember/core/device.hpp"

#include <vector>

#include "ember/core/error.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ember {

void check_device_index(int device) {
  EMBER_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device,
              " is out of range [0, ", kMaxDevices, ")");
}

int cuda_device_count() {
#if EMBER_WITH_CUDA
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver or no device: not an error for a CPU run
      return 0;
    }
    return n;
  }();
  return count;
#else
  return 0;
#endif
}

void require_cuda_device(int device, const char* what) {
  const int n = cuda_device_count();
  if (n == 0) throw_cuda_unavailable(what);
  if (device < 0 || device >= n) {
    EMBER_THROW_AS(CudaUnavailableError, what, " asked for cuda:", device, " but only ", n,
                   " CUDA device(s) are visible");
  }
}

#if EMBER_WITH_CUDA

int current_device() {
  int d = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int device) {
  require_cuda_device(device, "set_device");
  EMBER_CUDA_CHECK(cudaSetDevice(device));
}

void synchronize_device(int device) {
  DeviceGuard guard(device);
  EMBER_CUDA_CHECK(cudaDeviceSynchronize());
}

DeviceMemoryInfo device_memory_info(int device) {
  DeviceGuard guard(device);
  std::size_t free_bytes = 0, total_bytes = 0;
  EMBER_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

std::string device_name(int device) {
  require_cuda_device(device, "device_name");
  cudaDeviceProp properties{};
  EMBER_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return properties.name;
}

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
        int can = from == to ? 1 : 0;
        if (from != to) {
          EMBER_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
          if (can != 0) {
            const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
            if (status == cudaErrorPeerAccessAlreadyEnabled) {
              (void)cudaGetLastError();
            } else {
              EMBER_CUDA_CHECK(status);
            }
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

bool can_access_peer(int from, int to) {
  const auto& m = peer_matrix();
  EMBER_CHECK(
      from >= 0 && to >= 0 && from < static_cast<int>(m.size()) && to < static_cast<int>(m.size()),
      "can_access_peer(", from, ", ", to, "): only ", m.size(), " device(s)");
  return m[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
}

DeviceGuard::DeviceGuard(int device) {
  require_cuda_device(device, "DeviceGuard");
  EMBER_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) EMBER_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

#else

int current_device() {
  throw_cuda_unavailable("current_device");
}
void set_device(int) {
  throw_cuda_unavailable("set_device");
}
void synchronize_device(int) {
  throw_cuda_unavailable("synchronize_device");
}
DeviceMemoryInfo device_memory_info(int) {
  throw_cuda_unavailable("device_memory_info");
}
std::string device_name(int) {
  throw_cuda_unavailable("device_name");
}
bool can_access_peer(int, int) {
  throw_cuda_unavailable("can_access_peer");
}
DeviceGuard::DeviceGuard(int) {
  throw_cuda_unavailable("DeviceGuard");
}
DeviceGuard::~DeviceGuard() = default;

#endif

}  // namespace ember
