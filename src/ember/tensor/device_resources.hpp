// What each CUDA device owns, created once per process and shared by every layer on it: its
// streams (compute, copy), library handles (cuBLAS, cuRAND) and the peer-access matrix.
#pragma once

#include <cstdint>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/stream.hpp"

// The libraries' own opaque types, so this header needs none of their headers.
struct cublasContext;
struct curandGenerator_st;

namespace ember {

using CublasHandle = ::cublasContext*;
using CurandGenerator = ::curandGenerator_st*;

class DeviceResources {
 public:
  // The resources of `device`, created on first use (thread-safe). Throws CudaUnavailableError
  // when the device does not exist.
  static DeviceResources& get(int device);

  int device() const { return device_; }
  // Where compute kernels go by default: the same stream as default_stream(device).
  StreamHandle compute_stream() const;
  // A second stream for host<->device copies, so they overlap compute.
  StreamHandle copy_stream() const { return copy_stream_.handle(); }
  // cuBLAS bound to nothing in particular: callers set the stream per call (cublasSetStream is
  // cheap). One handle per device: drive each device from one thread at a time.
  CublasHandle cublas() const { return cublas_; }
  // A Philox generator seeded from `seed` at creation; reseed with set_seed().
  CurandGenerator curand() const { return curand_; }
  void set_seed(std::uint64_t seed);
  Event make_event(bool timing = false) const { return Event::create(device_, timing); }

  // True when `from` can read and write memory of `to` directly (peer access is enabled for all
  // such pairs when the resources are first created).
  static bool can_access_peer(int from, int to);

  DeviceResources(const DeviceResources&) = delete;
  DeviceResources& operator=(const DeviceResources&) = delete;

 private:
  explicit DeviceResources(int device);
  ~DeviceResources();

  int device_;
  Stream copy_stream_;
  CublasHandle cublas_ = nullptr;
  CurandGenerator curand_ = nullptr;
};

}  // namespace ember
