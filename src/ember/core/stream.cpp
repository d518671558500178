#include "ember/core/stream.hpp"

#include <array>
#include <memory>

#include "ember/core/error.hpp"
#include "ember/core/per_device.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ember {

namespace {
thread_local std::array<StreamHandle, kMaxDevices> t_current_stream{};
}  // namespace

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Stream doomed(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Event doomed(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

StreamGuard::StreamGuard(int device, StreamHandle stream) : device_(device) {
  check_device_index(device);
  previous_ = t_current_stream[device];
  t_current_stream[device] = stream;
}

StreamGuard::~StreamGuard() {
  t_current_stream[device_] = previous_;
}

StreamHandle current_stream(int device) {
  check_device_index(device);
  StreamHandle s = t_current_stream[device];
  return s != nullptr ? s : default_stream(device);
}

#if EMBER_WITH_CUDA

Stream Stream::create(int device, int priority) {
  DeviceGuard guard(device);
  Stream s;
  cudaStream_t handle = nullptr;
  EMBER_CUDA_CHECK(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority));
  s.handle_ = handle;
  s.device_ = device;
  return s;
}

Stream::~Stream() {
  if (handle_ != nullptr) (void)cudaStreamDestroy(handle_);
}

void Stream::synchronize() const {
  synchronize_stream(handle_);
}

Event Event::create(int device, bool timing) {
  DeviceGuard guard(device);
  Event e;
  cudaEvent_t handle = nullptr;
  EMBER_CUDA_CHECK(
      cudaEventCreateWithFlags(&handle, timing ? cudaEventDefault : cudaEventDisableTiming));
  e.handle_ = handle;
  e.device_ = device;
  return e;
}

Event::~Event() {
  if (handle_ != nullptr) (void)cudaEventDestroy(handle_);
}

void Event::record(StreamHandle stream) {
  EMBER_CHECK(handle_ != nullptr, "recording an empty Event");
  EMBER_CUDA_CHECK(cudaEventRecord(handle_, stream));
}

bool Event::query() const {
  EMBER_CHECK(handle_ != nullptr, "querying an empty Event");
  const cudaError_t status = cudaEventQuery(handle_);
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  EMBER_CUDA_CHECK(status);
  return false;
}

void Event::synchronize() const {
  EMBER_CHECK(handle_ != nullptr, "synchronizing an empty Event");
  EMBER_CUDA_CHECK(cudaEventSynchronize(handle_));
}

void Event::block(StreamHandle stream) const {
  EMBER_CHECK(handle_ != nullptr, "waiting on an empty Event");
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream, handle_, 0));
}

namespace {
bool capturing(StreamHandle stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EMBER_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status == cudaStreamCaptureStatusActive;
}
}  // namespace

void Event::record_across_capture(StreamHandle stream) {
  EMBER_CHECK(handle_ != nullptr, "recording an empty Event");
  EMBER_CUDA_CHECK(cudaEventRecordWithFlags(
      handle_, stream, capturing(stream) ? cudaEventRecordExternal : cudaEventRecordDefault));
}

void Event::block_across_capture(StreamHandle stream) const {
  EMBER_CHECK(handle_ != nullptr, "waiting on an empty Event");
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(
      stream, handle_, capturing(stream) ? cudaEventWaitExternal : cudaEventWaitDefault));
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, start.handle_, end.handle_));
  return ms;
}

namespace {
// The process-wide non-blocking streams of one device (per_device.hpp: never destroyed): the
// compute stream, where the training step runs, and the copy stream.
std::unique_ptr<Stream> make_compute_stream(int device) {
  return std::make_unique<Stream>(Stream::create(device, kStepPriority));
}
std::unique_ptr<Stream> make_copy_stream(int device) {
  return std::make_unique<Stream>(Stream::create(device, kBackgroundPriority));
}
}  // namespace

StreamHandle default_stream(int device) {
  require_cuda_device(device, "default_stream");
  static PerDevice<Stream> streams(make_compute_stream);
  return streams.get(device).handle();
}

StreamHandle copy_stream(int device) {
  require_cuda_device(device, "copy_stream");
  static PerDevice<Stream> streams(make_copy_stream);
  return streams.get(device).handle();
}

void synchronize_stream(StreamHandle stream) {
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
}

int stream_priority(StreamHandle stream) {
  int priority = 0;
  EMBER_CUDA_CHECK(cudaStreamGetPriority(stream, &priority));
  return priority;
}

void wait_for_stream(StreamHandle waiter, StreamHandle first, int device) {
  if (waiter == nullptr || first == nullptr || waiter == first) return;
  // A fresh event: it may be destroyed while the wait is pending (CUDA keeps it until done).
  Event done = Event::create(device);
  done.record(first);
  done.block(waiter);
}

#else

void wait_for_stream(StreamHandle waiter, StreamHandle first, int) {
  if (waiter == nullptr || first == nullptr || waiter == first) return;
  throw_cuda_unavailable("wait_for_stream");
}

Stream Stream::create(int, int) {
  throw_cuda_unavailable("Stream::create");
}
Stream::~Stream() = default;
void Stream::synchronize() const {
  throw_cuda_unavailable("Stream::synchronize");
}
Event Event::create(int, bool) {
  throw_cuda_unavailable("Event::create");
}
Event::~Event() = default;
void Event::record(StreamHandle) {
  throw_cuda_unavailable("Event::record");
}
bool Event::query() const {
  throw_cuda_unavailable("Event::query");
}
void Event::synchronize() const {
  throw_cuda_unavailable("Event::synchronize");
}
void Event::block(StreamHandle) const {
  throw_cuda_unavailable("Event::block");
}
void Event::record_across_capture(StreamHandle) {
  throw_cuda_unavailable("Event::record_across_capture");
}
void Event::block_across_capture(StreamHandle) const {
  throw_cuda_unavailable("Event::block_across_capture");
}
float Event::elapsed_ms(const Event&, const Event&) {
  throw_cuda_unavailable("Event::elapsed_ms");
}
StreamHandle default_stream(int) {
  throw_cuda_unavailable("default_stream");
}
StreamHandle copy_stream(int) {
  throw_cuda_unavailable("copy_stream");
}
void synchronize_stream(StreamHandle) {
  throw_cuda_unavailable("synchronize_stream");
}
int stream_priority(StreamHandle) {
  throw_cuda_unavailable("stream_priority");
}

#endif

}  // namespace ember
