#include "ember/core/cuda_graph.hpp"

#include "ember/core/error.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ember {

#if EMBER_WITH_CUDA

struct CudaGraph::State {
  cudaStream_t capturing = nullptr;
  cudaGraphExec_t exec = nullptr;
};

CudaGraph::CudaGraph() : state_(std::make_unique<State>()) {}

CudaGraph::~CudaGraph() {
  abandon_capture();
  if (state_->exec != nullptr) (void)cudaGraphExecDestroy(state_->exec);
}

bool CudaGraph::compiled() {
  return true;
}

void CudaGraph::begin_capture(StreamHandle stream) {
  EMBER_CHECK(state_->capturing == nullptr, "CudaGraph: a capture is already under way");
  EMBER_CHECK(stream != nullptr, "CudaGraph: capture needs a non-default stream");
  EMBER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  state_->capturing = stream;
}

std::string CudaGraph::end_capture() {
  EMBER_CHECK(state_->capturing != nullptr, "CudaGraph: end_capture without begin_capture");
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(state_->capturing, &graph);
  state_->capturing = nullptr;
  if (ended != cudaSuccess || graph == nullptr) {
    (void)cudaGetLastError();
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    return std::string("the capture was invalidated (") + cudaGetErrorString(ended) +
           "): the work waits for the device or uses another stream";
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("cudaGraphInstantiate failed: ") + cudaGetErrorString(made);
  }
  if (state_->exec != nullptr) (void)cudaGraphExecDestroy(state_->exec);
  state_->exec = exec;
  return {};
}

void CudaGraph::abandon_capture() noexcept {
  if (state_ == nullptr || state_->capturing == nullptr) return;
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(state_->capturing, &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  state_->capturing = nullptr;
}

bool CudaGraph::ready() const {
  return state_->exec != nullptr;
}

void CudaGraph::launch(StreamHandle stream) {
  EMBER_CHECK(ready(), "CudaGraph: launch before a successful capture");
  EMBER_CUDA_CHECK(cudaGraphLaunch(state_->exec, stream));
}

#else

struct CudaGraph::State {};

CudaGraph::CudaGraph() = default;
CudaGraph::~CudaGraph() = default;
bool CudaGraph::compiled() {
  return false;
}
void CudaGraph::begin_capture(StreamHandle) {
  EMBER_THROW("CudaGraph: this build has no CUDA");
}
std::string CudaGraph::end_capture() {
  return "this build has no CUDA";
}
void CudaGraph::abandon_capture() noexcept {}
bool CudaGraph::ready() const {
  return false;
}
void CudaGraph::launch(StreamHandle) {
  EMBER_THROW("CudaGraph: this build has no CUDA");
}

#endif

}  // namespace ember
