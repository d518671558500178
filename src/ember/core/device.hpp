// CUDA devices as the rest of Ember sees them, in every build.
//
// This header includes no CUDA header, so CPU-only code and CPU-only builds use it freely. In a
// CPU-only build, or on a machine without a usable driver, cuda_device_count() is 0 and anything
// that needs a device throws CudaUnavailableError.
#pragma once

#include <string>

// The CUDA runtime's own opaque types, declared here so no CUDA header is needed.
struct CUstream_st;
struct CUevent_st;

namespace ember {

// The most CUDA devices one process addresses: the bound of every per-device table.
inline constexpr int kMaxDevices = 64;
// Throws ember::Error unless 0 <= device < kMaxDevices (the device need not exist).
void check_device_index(int device);

// Opaque handles, the same types as cudaStream_t / cudaEvent_t in CUDA builds.
using StreamHandle = ::CUstream_st*;
using EventHandle = ::CUevent_st*;

// True when this build has the CUDA path compiled in.
constexpr bool cuda_compiled() {
#if EMBER_WITH_CUDA
  return true;
#else
  return false;
#endif
}

// Number of usable CUDA devices; 0 without CUDA, without a driver, or without devices. Never
// throws. Honours CUDA_VISIBLE_DEVICES through the runtime.
int cuda_device_count();
inline bool cuda_available() {
  return cuda_device_count() > 0;
}

// Throws CudaUnavailableError (naming `what`) unless `device` exists.
void require_cuda_device(int device, const char* what);

int current_device();
void set_device(int device);
void synchronize_device(int device);

// True when `from` can read and write memory of `to` directly. The first call enables peer
// access between every pair of visible devices that supports it.
bool can_access_peer(int from, int to);

// Free and total memory of a device, in bytes.
struct DeviceMemoryInfo {
  unsigned long long free_bytes = 0;
  unsigned long long total_bytes = 0;
};
DeviceMemoryInfo device_memory_info(int device);

// The device's name as the driver reports it ("NVIDIA H100 80GB HBM3").
std::string device_name(int device);

// Makes `device` current for the guard's lifetime and restores the previous one after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace ember
