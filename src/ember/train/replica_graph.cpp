// The CUDA graph of a replica's dense step (solver "cuda_graph" / "holistic_cuda_graph"; see
// docs/training.md, "CUDA graphs").
//
// What is captured: the dense network's forward and backward. Their kernels read and write the
// same tensors every step (the input blobs are bound once and refilled, the parameters and
// gradients live in the parameter store), and nothing in them changes from step to step, so a
// replay is the same work as an eager run. What stays outside: feeding the inputs (the embedding
// lookup inserts keys and reports a full table through events), the gradients' all-reduce, the
// dense optimizer and the embedding update (the learning rate and Adam's step count are host
// values passed to their kernels, different every step).
//
// The first step runs eagerly (it plans the matrix products and fills the allocator's cache);
// the second is captured, then launched; every later step is one graph launch. Where capture is
// not possible the step runs eagerly from then on, and the log says why once.
#include "ember/core/caching_allocators.hpp"
#include "ember/core/caching_device_allocator.hpp"
#include "ember/core/cuda_graph.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/network/layers/dropout_layer.hpp"
#include "ember/train/replica.hpp"

namespace ember::train {

namespace {
std::int64_t device_allocations(Place place) {
  if (!caching_allocators_enabled()) return 0;
  return caching_device_allocator(place.device()).stats().num_allocs;
}
}  // namespace

std::string Replica::graph_obstacle() const {
  if (!place_.is_cuda()) return "training runs on the CPU, which has no CUDA graphs";
  if (!CudaGraph::compiled()) return "this build has no CUDA";
  for (const auto& layer : train_.network->layers()) {
    if (dynamic_cast<const network::DropoutLayer*>(layer.get()) != nullptr) {
      return cat("layer '", layer->name(),
                 "' (Dropout) draws a new mask every step from a counter on the host, which a "
                 "replayed graph would repeat");
    }
  }
  return {};
}

void Replica::run_without_graph(const std::string& why) {
  dense_graph_.reset();
  graph_status_ = "off: " + why;
  log_once(cat("cuda_graph ", why), spdlog::level::warn,
           cat("cuda_graph: ", why, "; the dense forward and backward run without a graph"));
}

void Replica::run_dense(StreamHandle s) {
  auto eager = [&] {
    train_.network->forward(true, s);
    train_.network->backward(s);
  };
  if (dense_graph_ == nullptr) return eager();
  if (dense_graph_->ready()) return dense_graph_->launch(s);
  if (eager_dense_steps_ < 1) {
    ++eager_dense_steps_;
    graph_status_ = "warming up";
    return eager();
  }
  const std::int64_t allocations = device_allocations(place_);
  std::string why;
  dense_graph_->begin_capture(s);
  try {
    train_.network->forward(true, s);
    train_.network->backward(s);
    why = dense_graph_->end_capture();
  } catch (const std::exception& e) {
    dense_graph_->abandon_capture();
    why = cat("capturing the dense step failed: ", e.what());
  }
  if (why.empty() && device_allocations(place_) != allocations) {
    // Memory taken while capturing would be handed to others between replays.
    why = cat("the dense step allocates device memory every step (",
              device_allocations(place_) - allocations, " allocations while capturing)");
  }
  if (!why.empty()) {
    run_without_graph(why);
    return eager();
  }
  graph_status_ = "replaying";
  dense_graph_->launch(s);
}

}  // namespace ember::train
