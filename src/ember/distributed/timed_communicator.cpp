#include "ember/distributed/timed_communicator.hpp"

namespace ember::distributed {

TimedCommunicator::Scope::Scope(PartTimer* timer, const char* part, StreamHandle stream)
    : timer_(timer), stream_(stream) {
  if (timer_ == nullptr) return;
  // A copy: opening a new part may move the timer's names.
  previous_ = std::string(timer_->open_part());
  timer_->begin(part, stream_);
}

TimedCommunicator::Scope::~Scope() {
  if (timer_ == nullptr) return;
  if (previous_.empty()) {
    timer_->end(stream_);
  } else {
    timer_->begin(previous_, stream_);
  }
}

void TimedCommunicator::all_reduce(const Tensor& inout, ReduceOp op, StreamHandle stream) {
  Scope s(timer_, kAllReduce, stream);
  inner_.all_reduce(inout, op, stream);
}

void TimedCommunicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op,
                                       StreamHandle stream) {
  Scope s(timer_, kReduceScatter, stream);
  inner_.reduce_scatter(in, out, op, stream);
}

void TimedCommunicator::all_gather(const Tensor& in, const Tensor& out, StreamHandle stream) {
  Scope s(timer_, kAllGather, stream);
  inner_.all_gather(in, out, stream);
}

void TimedCommunicator::all_to_all_v(const Tensor& send,
                                     const std::vector<std::int64_t>& send_counts,
                                     const Tensor& recv,
                                     const std::vector<std::int64_t>& recv_counts,
                                     StreamHandle stream) {
  Scope s(timer_, kAllToAll, stream);
  inner_.all_to_all_v(send, send_counts, recv, recv_counts, stream);
}

void TimedCommunicator::broadcast(const Tensor& inout, int root, StreamHandle stream) {
  Scope s(timer_, kBroadcast, stream);
  inner_.broadcast(inout, root, stream);
}

}  // namespace ember::distributed
