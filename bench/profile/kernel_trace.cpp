// A kernel timeline for machines without Nsight Systems: a CUPTI library the CUDA driver loads
// into any program started with CUDA_INJECTION64_PATH set to it (kernel_timeline.py run does
// that). It records every kernel and copy (start, end, device, stream, grid size, the host's
// launch call through its correlation id) and every runtime and driver API call, and writes them
// at exit as CSV to $KERNEL_TRACE_OUT.<pid>.csv (default /tmp/kernel-trace.<pid>.csv):
//   K|M,start_ns,end_ns,device,stream,grid_blocks,correlation,name   (kernels, copies)
//   A,start_ns,end_ns,-,thread,callback_id,correlation,api            (host calls)
// Timestamps of both kinds come from CUPTI's one clock. Not part of Ember: a tool for its
// benchmarks (docs/performance.md, "A kernel timeline of the 2-GPU step", shows a use).
#include <cupti.h>
#include <cxxabi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

FILE* g_out = nullptr;
std::mutex g_mutex;
constexpr std::size_t kBufferBytes = std::size_t{8} << 20;

void check(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", call, text != nullptr ? text : "?");
}

// The demangled name without commas (the CSV's separator), cut to 160 characters.
std::string readable(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : name;
  std::free(d);
  for (char& c : s) {
    if (c == ',') c = ';';
  }
  if (s.size() > 160) s.resize(160);
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void write_record(const CUpti_Activity* record) {
  using ULL = unsigned long long;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      std::fprintf(g_out, "K,%llu,%llu,%u,%u,%lld,%u,%s\n", ULL{k->start}, ULL{k->end}, k->deviceId,
                   k->streamId, static_cast<long long>(k->gridX) * k->gridY * k->gridZ,
                   k->correlationId, readable(k->name).c_str());
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      std::fprintf(g_out, "M,%llu,%llu,%u,%u,0,%u,copy kind %u of %llu bytes\n", ULL{m->start},
                   ULL{m->end}, m->deviceId, m->streamId, m->correlationId,
                   static_cast<unsigned>(m->copyKind), ULL{m->bytes});
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      std::fprintf(g_out, "A,%llu,%llu,-,%u,%u,%u,%s\n", ULL{a->start}, ULL{a->end}, a->threadId,
                   static_cast<unsigned>(a->cbid), a->correlationId,
                   record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? "runtime" : "driver");
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard lock(g_mutex);
    CUpti_Activity* record = nullptr;
    while (g_out != nullptr &&
           cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      write_record(record);
    }
  }
  std::free(buffer);
}

void finish() {
  check(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
  std::lock_guard lock(g_mutex);
  if (g_out != nullptr) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

// Called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH).
extern "C" int InitializeInjection() {
  const char* prefix = std::getenv("KERNEL_TRACE_OUT");
  const std::string path = std::string(prefix != nullptr ? prefix : "/tmp/kernel-trace") + "." +
                           std::to_string(::getpid()) + ".csv";
  g_out = std::fopen(path.c_str(), "w");
  if (g_out == nullptr) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path.c_str());
    return 0;
  }
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
        "cuptiActivityRegisterCallbacks");
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
    check(cuptiActivityEnable(kind), "cuptiActivityEnable");
  }
  std::atexit(finish);
  return 1;
}
