// PyTorch's CUDA caching allocator behind a C interface, for bench_memory. Built only where
// libtorch's headers and libraries were found, as a library of its own that bench_memory loads
// at run time: it is compiled with libtorch's C++ ABI setting, which may differ from Ember's, so
// nothing but plain C types crosses the boundary. It calls no CUDA runtime function itself
// (libtorch brings its own runtime).
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

namespace {

namespace torch_alloc = c10::cuda::CUDACachingAllocator;

std::string g_error;
int g_device = 0;

void remember(const std::exception& e) { g_error = e.what(); }

c10::cuda::CUDAStream wrap(void* stream) {
  return c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream),
                                          static_cast<c10::DeviceIndex>(g_device));
}

}  // namespace

extern "C" {

const char* ember_torch_error() { return g_error.c_str(); }

int ember_torch_init(int device, char* version, int length) {
  try {
    g_device = device;
    torch_alloc::init(static_cast<int>(c10::cuda::device_count()));
    std::snprintf(version, static_cast<std::size_t>(length), "%s", EMBER_TORCH_VERSION);
    return 1;
  } catch (const std::exception& e) {
    remember(e);
    return 0;
  }
}

void* ember_torch_alloc(std::size_t bytes, void* stream) {
  try {
    return torch_alloc::raw_alloc_with_stream(bytes, static_cast<cudaStream_t>(stream));
  } catch (const std::exception& e) {
    remember(e);
    return nullptr;
  }
}

void ember_torch_free(void* ptr) {
  try {
    torch_alloc::raw_delete(ptr);
  } catch (const std::exception& e) {
    remember(e);
  }
}

// An allocation through allocate() on `stream`, whose DataPtr recordStream needs. `*context`
// receives the DataPtr; ember_torch_free_ctx frees both.
void* ember_torch_alloc_ctx(std::size_t bytes, void* stream, void** context) {
  try {
    const c10::cuda::CUDAStream previous =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(g_device));
    c10::cuda::setCurrentCUDAStream(wrap(stream));
    auto* data = new c10::DataPtr(torch_alloc::get()->allocate(bytes));
    c10::cuda::setCurrentCUDAStream(previous);
    *context = data;
    return data->get();
  } catch (const std::exception& e) {
    remember(e);
    return nullptr;
  }
}

int ember_torch_record_stream(void* context, void* stream) {
  try {
    torch_alloc::recordStream(*static_cast<c10::DataPtr*>(context), wrap(stream));
    return 1;
  } catch (const std::exception& e) {
    remember(e);
    return 0;
  }
}

void ember_torch_free_ctx(void* context) { delete static_cast<c10::DataPtr*>(context); }

// Empties the cache and resets the peak statistics.
void ember_torch_reset(int device) {
  try {
    torch_alloc::emptyCache();
    torch_alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device));
  } catch (const std::exception& e) {
    remember(e);
  }
}

long long ember_torch_peak_reserved(int device) {
  try {
    const auto stats = torch_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    return static_cast<long long>(stats.reserved_bytes[0].peak);
  } catch (const std::exception& e) {
    remember(e);
    return -1;
  }
}

// Segments ever allocated (cudaMalloc calls), from the start of the process.
long long ember_torch_segments_allocated(int device) {
  try {
    const auto stats = torch_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    return static_cast<long long>(stats.segment[0].allocated);
  } catch (const std::exception& e) {
    remember(e);
    return -1;
  }
}

}  // extern "C"
