// PyTorch's CUDA caching allocator behind a C interface, for bench_memory. Built only where
// libtorch's headers and libraries were found, as a library of its own that bench_memory loads
// at run time: it is compiled with libtorch's C++ ABI setting, which may differ from Ember's, so
// nothing but plain C types crosses the boundary, and no exception does either. It calls no
// CUDA runtime function itself (libtorch brings its own runtime).
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

namespace {

namespace torch_alloc = c10::cuda::CUDACachingAllocator;

thread_local std::string g_error;
int g_device = 0;

void remember(const std::exception& e) {
  g_error = e.what();
}
void remember_unknown() {
  g_error = "an exception that is not a std::exception";
}

// Every entry point runs its body through this: no exception (c10::Error included) may cross the
// C boundary, where it would terminate the benchmark.
template <typename Body>
bool guarded(Body&& body) {
  try {
    body();
    return true;
  } catch (const std::exception& e) {
    remember(e);
  } catch (...) {
    remember_unknown();
  }
  return false;
}

c10::cuda::CUDAStream wrap(void* stream) {
  return c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream),
                                          static_cast<c10::DeviceIndex>(g_device));
}

// libc10_cuda leaves hooks that only libtorch_cuda fills in, from its static initialisers (the
// primary-context check MaybeSetDevice calls: without it c10 throws "Should never been called").
// Python's `import torch` loads libtorch_cuda; a C++ program that links only c10 must load it
// itself, globally, before the allocator is used.
bool load_torch_cuda() {
  void* lib = dlopen(EMBER_TORCH_CUDA_LIB, RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    g_error = std::string("could not load ") + EMBER_TORCH_CUDA_LIB + ": " +
              (why != nullptr ? why : "unknown error");
    return false;
  }
  return true;
}

// Frees a DataPtr from allocate() without letting its deleter throw inside a destructor (which
// would terminate): the context is taken out and the deleter called here, under a try.
void free_data_ptr(c10::DataPtr* data) {
  const c10::DeleterFnPtr deleter = data->get_deleter();
  void* context = data->release_context();
  delete data;
  if (deleter != nullptr && context != nullptr) deleter(context);
}

}  // namespace

extern "C" {

const char* ember_torch_error() {
  return g_error.c_str();
}

// Loads libtorch_cuda, initialises the allocator and tries every entry point once, so that a
// PyTorch that does not work here fails now (the benchmark then leaves its column out) rather
// than in the middle of a measurement.
int ember_torch_init(int device, char* version, int length) {
  if (!load_torch_cuda()) return 0;
  const bool ok = guarded([&] {
    g_device = device;
    torch_alloc::init(static_cast<int>(c10::cuda::device_count()));
    void* p = torch_alloc::raw_alloc_with_stream(4096, nullptr);
    if (p == nullptr) throw std::runtime_error("raw_alloc_with_stream returned null");
    torch_alloc::raw_delete(p);
    auto* data = new c10::DataPtr(torch_alloc::get()->allocate(4096));
    torch_alloc::recordStream(
        *data, c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)));
    free_data_ptr(data);
    torch_alloc::emptyCache();
    (void)torch_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    std::snprintf(version, static_cast<std::size_t>(length), "%s", EMBER_TORCH_VERSION);
  });
  return ok ? 1 : 0;
}

void* ember_torch_alloc(std::size_t bytes, void* stream) {
  void* p = nullptr;
  if (!guarded([&] {
        p = torch_alloc::raw_alloc_with_stream(bytes, static_cast<cudaStream_t>(stream));
      })) {
    return nullptr;
  }
  return p;
}

int ember_torch_free(void* ptr) {
  return guarded([&] { torch_alloc::raw_delete(ptr); }) ? 1 : 0;
}

// An allocation through allocate() on `stream`, whose DataPtr recordStream needs. `*context`
// receives the DataPtr; ember_torch_free_ctx frees both.
void* ember_torch_alloc_ctx(std::size_t bytes, void* stream, void** context) {
  void* p = nullptr;
  const bool ok = guarded([&] {
    const c10::cuda::CUDAStream previous =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(g_device));
    c10::cuda::setCurrentCUDAStream(wrap(stream));
    c10::DataPtr data;
    try {
      data = torch_alloc::get()->allocate(bytes);
    } catch (...) {
      c10::cuda::setCurrentCUDAStream(previous);
      throw;
    }
    c10::cuda::setCurrentCUDAStream(previous);
    auto* owned = new c10::DataPtr(std::move(data));
    *context = owned;
    p = owned->get();
  });
  return ok ? p : nullptr;
}

int ember_torch_record_stream(void* context, void* stream) {
  return guarded(
             [&] { torch_alloc::recordStream(*static_cast<c10::DataPtr*>(context), wrap(stream)); })
             ? 1
             : 0;
}

int ember_torch_free_ctx(void* context) {
  return guarded([&] { free_data_ptr(static_cast<c10::DataPtr*>(context)); }) ? 1 : 0;
}

// Empties the cache and resets the peak and the accumulated statistics (so the segment count of
// a trace is that trace's, not the process's).
int ember_torch_reset(int device) {
  return guarded([&] {
    torch_alloc::emptyCache();
    torch_alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device));
    torch_alloc::resetAccumulatedStats(static_cast<c10::DeviceIndex>(device));
  })
             ? 1
             : 0;
}

long long ember_torch_peak_reserved(int device) {
  long long peak = -1;
  guarded([&] {
    const auto stats = torch_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    peak = static_cast<long long>(stats.reserved_bytes[0].peak);
  });
  return peak;
}

// Segments allocated (cudaMalloc calls) since the last ember_torch_reset.
long long ember_torch_segments_allocated(int device) {
  long long n = -1;
  guarded([&] {
    const auto stats = torch_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    n = static_cast<long long>(stats.segment[0].allocated);
  });
  return n;
}

}  // extern "C"
