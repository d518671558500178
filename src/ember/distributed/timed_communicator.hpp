// A communicator that forwards every collective to another one and, while a part timer is set,
// times each collective as a part of its own ("all-to-all", "all-reduce", ...) on the call's
// stream, then reopens the part that was open: a profiled training step then shows how long it
// spent in collectives, cut out of the embedding and dense parts around them. The training path
// (train::Replica) hands this wrapper to everything that talks to other ranks, so profiling needs
// no hook in any backend; with no timer set it adds one pointer test per call.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ember/core/part_timer.hpp"
#include "ember/distributed/collectives.hpp"

namespace ember::distributed {

class TimedCommunicator final : public Communicator {
 public:
  // `inner` must outlive this wrapper.
  explicit TimedCommunicator(Communicator& inner) : inner_(inner) {}

  // nullptr (the default): time nothing. The timer must outlive its use here.
  void set_part_timer(PartTimer* timer) { timer_ = timer; }

  // The names of the parts the collectives are timed as.
  static constexpr const char* kAllReduce = "collective: all-reduce";
  static constexpr const char* kReduceScatter = "collective: reduce-scatter";
  static constexpr const char* kAllGather = "collective: all-gather";
  static constexpr const char* kAllToAll = "collective: all-to-all";
  static constexpr const char* kBroadcast = "collective: broadcast";

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Place place() const override { return inner_.place(); }
  const char* backend() const override { return inner_.backend(); }

  void all_reduce(const Tensor& inout, ReduceOp op, StreamHandle stream) override;
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op,
                      StreamHandle stream) override;
  void all_gather(const Tensor& in, const Tensor& out, StreamHandle stream) override;
  void all_to_all_v(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                    const Tensor& recv, const std::vector<std::int64_t>& recv_counts,
                    StreamHandle stream) override;
  void broadcast(const Tensor& inout, int root, StreamHandle stream) override;
  void barrier() override { inner_.barrier(); }
  void abort(const std::string& why) override { inner_.abort(why); }

 private:
  // Runs `collective` as the part `part` when a timer is set, then reopens the part open before
  // it (or closes the timing when none was). A collective that throws leaves the timing as it
  // is: the step it belonged to failed, and nothing is recorded on its stream after the error.
  template <class F>
  void timed(const char* part, StreamHandle stream, F&& collective);

  Communicator& inner_;
  PartTimer* timer_ = nullptr;
};

}  // namespace ember::distributed
