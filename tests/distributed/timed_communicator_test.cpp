// TimedCommunicator: every collective reaches the wrapped communicator with its arguments (the
// results equal the plain communicator's), and with a part timer set each collective is a part
// of its own that cuts into the part open around it, which is reopened after.
#include "ember/distributed/timed_communicator.hpp"

#include <gtest/gtest.h>

#include <exception>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

using distributed::TimedCommunicator;

// Runs every collective once on each of `n` in-process ranks, through a TimedCommunicator that
// times rank 0 with `timer` (when not null) inside an open part "around"; returns each rank's
// outputs, concatenated.
std::vector<std::vector<float>> run_collectives(int n, PartTimer* timer, std::uint64_t seed) {
  auto comms = distributed::make_in_process_communicators(n);
  std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        TimedCommunicator comm(*comms[static_cast<std::size_t>(r)]);
        PartTimer* t = r == 0 ? timer : nullptr;
        comm.set_part_timer(t);
        if (t != nullptr) t->begin("around", nullptr);
        auto rng = testing::make_rng(seed + static_cast<std::uint64_t>(r));
        std::uniform_real_distribution<float> dist(-1, 1);
        std::vector<float> v(static_cast<std::size_t>(7 * n));
        for (auto& x : v)
          x = dist(rng);
        const Tensor a = Tensor::from_vector(v);
        comm.all_reduce(a, distributed::ReduceOp::Sum, nullptr);
        const Tensor scattered = Tensor::zeros({7}, DType::F32);
        comm.reduce_scatter(a, scattered, distributed::ReduceOp::Max, nullptr);
        const Tensor gathered = Tensor::zeros({7 * n}, DType::F32);
        comm.all_gather(scattered, gathered, nullptr);
        const Tensor received = Tensor::zeros({7 * n}, DType::F32);
        comm.all_to_all_v(gathered, std::vector<std::int64_t>(n, 7), received,
                          std::vector<std::int64_t>(n, 7), nullptr);
        comm.broadcast(received, n - 1, nullptr);
        comm.barrier();
        if (t != nullptr) t->end(nullptr);
        auto& o = out[static_cast<std::size_t>(r)];
        for (const Tensor& x : {a, scattered, gathered, received}) {
          const auto values = x.to_vector<float>();
          o.insert(o.end(), values.begin(), values.end());
        }
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& th : threads)
    th.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

TEST(TimedCommunicator, ForwardsEveryCollectiveAndTimesEachAsItsOwnPart) {
  for (int n : {1, 2, 3}) {
    const auto untimed = run_collectives(n, nullptr, 11);
    PartTimer timer(Place::host());
    const auto timed = run_collectives(n, &timer, 11);
    EXPECT_EQ(timed, untimed) << n << " ranks";

    std::set<std::string> names;
    for (const auto& p : timer.collect()) {
      names.insert(p.name);
      EXPECT_EQ(p.intervals, p.name == "around" ? 6 : 1) << p.name << ", " << n << " ranks";
      EXPECT_GE(p.ms, 0.0) << p.name;
    }
    EXPECT_EQ(names, (std::set<std::string>{
                         "around", TimedCommunicator::kAllReduce, TimedCommunicator::kReduceScatter,
                         TimedCommunicator::kAllGather, TimedCommunicator::kAllToAll,
                         TimedCommunicator::kBroadcast}))
        << n << " ranks";
    EXPECT_EQ(timer.open_part(), "") << "the timing was closed";
  }
}

TEST(TimedCommunicator, WithNoOpenPartTheCollectiveClosesItsOwn) {
  auto comms = distributed::make_in_process_communicators(1);
  TimedCommunicator comm(*comms[0]);
  PartTimer timer(Place::host());
  comm.set_part_timer(&timer);
  comm.all_reduce(Tensor::from_vector(std::vector<float>{1, 2, 3}), distributed::ReduceOp::Sum,
                  nullptr);
  EXPECT_EQ(timer.open_part(), "");
  ASSERT_EQ(timer.collect().size(), 1u);
  EXPECT_EQ(timer.collect()[0].name, TimedCommunicator::kAllReduce);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_STREQ(comm.backend(), comms[0]->backend());
}

// A collective that refuses its arguments throws through the wrapper as it is, with the timing
// left where the failed step put it (nothing recorded after the error).
TEST(TimedCommunicator, ACollectiveThatThrowsPassesItsErrorThrough) {
  auto comms = distributed::make_in_process_communicators(1);
  TimedCommunicator comm(*comms[0]);
  PartTimer timer(Place::host());
  comm.set_part_timer(&timer);
  timer.begin("around", nullptr);
  const Tensor send = Tensor::zeros({4}, DType::F32);
  EMBER_EXPECT_THROW_WITH(
      comm.all_to_all_v(send, {5}, Tensor::zeros({4}, DType::F32), {5}, nullptr), Error,
      "add up to 5 elements but the buffer holds 4");
  EXPECT_EQ(timer.open_part(), TimedCommunicator::kAllToAll);
}

}  // namespace
}  // namespace ember
