#include "ember/distributed/timed_communicator.hpp"

namespace ember::distributed {

template <class F>
void TimedCommunicator::timed(const char* part, StreamHandle stream, F&& collective) {
  if (timer_ == nullptr) {
    std::forward<F>(collective)();
    return;
  }
  // A copy: opening a new part may move the timer's names.
  const std::string previous(timer_->open_part());
  timer_->begin(part, stream);
  std::forward<F>(collective)();
  if (previous.empty()) {
    timer_->end(stream);
  } else {
    timer_->begin(previous, stream);
  }
}

void TimedCommunicator::all_reduce(const Tensor& inout, ReduceOp op, StreamHandle stream) {
  timed(kAllReduce, stream, [&] { inner_.all_reduce(inout, op, stream); });
}

void TimedCommunicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op,
                                       StreamHandle stream) {
  timed(kReduceScatter, stream, [&] { inner_.reduce_scatter(in, out, op, stream); });
}

void TimedCommunicator::all_gather(const Tensor& in, const Tensor& out, StreamHandle stream) {
  timed(kAllGather, stream, [&] { inner_.all_gather(in, out, stream); });
}

void TimedCommunicator::all_to_all_v(const Tensor& send,
                                     const std::vector<std::int64_t>& send_counts,
                                     const Tensor& recv,
                                     const std::vector<std::int64_t>& recv_counts,
                                     StreamHandle stream) {
  timed(kAllToAll, stream,
        [&] { inner_.all_to_all_v(send, send_counts, recv, recv_counts, stream); });
}

void TimedCommunicator::broadcast(const Tensor& inout, int root, StreamHandle stream) {
  timed(kBroadcast, stream, [&] { inner_.broadcast(inout, root, stream); });
}

}  // namespace ember::distributed
