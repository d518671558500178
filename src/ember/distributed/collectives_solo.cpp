#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::distributed {

namespace {

class SoloCommunicator final : public Communicator {
 public:
  explicit SoloCommunicator(Place place) : place_(place) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Place place() const override { return place_; }
  const char* backend() const override { return "solo"; }

  void all_reduce(const Tensor& inout, ReduceOp, StreamHandle) override { check_all_reduce(inout); }
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp, StreamHandle stream) override {
    check_reduce_scatter(in, out);
    copy_prefix(out, in, out.numel(), stream);
  }
  void all_gather(const Tensor& in, const Tensor& out, StreamHandle stream) override {
    check_all_gather(in, out);
    copy_prefix(out, in, in.numel(), stream);
  }
  void all_to_all_v(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                    const Tensor& recv, const std::vector<std::int64_t>& recv_counts,
                    StreamHandle stream) override {
    check_all_to_all_v(send, send_counts, recv, recv_counts);
    EMBER_CHECK(send_counts[0] == recv_counts[0], "all_to_all_v on one rank: sends ",
                send_counts[0], " elements but expects ", recv_counts[0]);
    copy_prefix(recv, send, send_counts[0], stream);
  }
  void broadcast(const Tensor& inout, int root, StreamHandle) override {
    check_broadcast(inout, root);
  }
  void barrier() override {
    if (place_.is_cuda()) synchronize_stream(current_stream(place_.device()));
  }
  void abort(const std::string&) override {}  // no peer waits for this rank

 private:
  // The first n elements of src to dst (the collective's checks made sure they fit).
  void copy_prefix(const Tensor& dst, const Tensor& src, std::int64_t n, StreamHandle stream) {
    if (n == 0 || dst.data() == src.data()) return;
    ops::copy(dst.flatten().slice(0, 0, n), src.flatten().slice(0, 0, n), stream);
  }
  Place place_;
};

}  // namespace

CommunicatorPtr make_solo_communicator(Place place) {
  return std::make_unique<SoloCommunicator>(place);
}

}  // namespace ember::distributed
