// A CUDA graph: the work one thread queues on one stream, captured once and replayed with one
// launch (cudaStreamBeginCapture / cudaGraphInstantiate / cudaGraphLaunch).
//
// Replaying is only right for work whose kernel arguments, pointers and shapes do not change
// between steps: the graph keeps what was captured. Capture fails (and says why) when the work
// does something a graph cannot hold, such as waiting for the device; nothing captured runs
// until launch(). Capture is thread-local (cudaStreamCaptureModeThreadLocal), so other threads
// (other ranks, the input pipeline) keep working meanwhile; but what another thread queues on
// the stream being captured joins the capture, so such threads queue on streams of their own
// (the input pipeline's collector works on the copy streams).
#pragma once

#include <memory>
#include <string>

#include "ember/core/device.hpp"

namespace ember {

class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Whether this build can make graphs at all.
  static bool compiled();

  // Starts capturing what this thread queues on `stream` (a non-default stream).
  void begin_capture(StreamHandle stream);
  // Ends the capture and instantiates the graph. Returns an empty string on success, else why
  // the work could not be captured (the capture is then dropped, and ready() stays false).
  std::string end_capture();
  // Ends a capture that failed part-way (after an exception), dropping what was captured.
  void abandon_capture() noexcept;
  bool ready() const;
  // Queues the whole captured work on `stream`.
  void launch(StreamHandle stream);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ember
