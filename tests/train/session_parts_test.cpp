// Session::set_part_timer: a profiled run times every part of the step on the first rank, counts
// its steps, trains exactly as an unprofiled run, and times nothing once the timer is removed.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ember/core/error.hpp"
#include "ember/core/part_timer.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

using namespace testing_support;

TEST(SessionParts, AProfiledRunTimesEveryPartAndTrainsTheSame) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 3000);
  for (int ranks : {1, 2}) {
    Session plain(tiny_config(json, *data, 256, 6), quiet_options("cpu", ranks));
    const TrainResult expected = plain.train();
    Session profiled(tiny_config(json, *data, 256, 6), quiet_options("cpu", ranks));
    PartTimer timer(Place::host());
    profiled.set_part_timer(&timer);
    const TrainResult got = profiled.train();
    EXPECT_EQ(losses_of(got), losses_of(expected)) << ranks << " ranks";
    EXPECT_EQ(timer.steps(), 6);
    std::set<std::string> device, host;
    for (const auto& p : timer.collect()) {
      (p.host ? host : device).insert(p.name);
      EXPECT_GE(p.ms, 0.0) << p.name;
      EXPECT_GE(p.intervals, 6) << p.name;
    }
    EXPECT_EQ(host, std::set<std::string>{"host: waiting for the next batch"});
    std::set<std::string> want = {"data: batch copies and inputs",
                                  "embedding forward",
                                  "bottom MLP forward",
                                  "interaction forward",
                                  "top MLP forward",
                                  "loss forward",
                                  "loss backward",
                                  "top MLP backward",
                                  "interaction backward",
                                  "bottom MLP backward",
                                  "dense optimizer",
                                  "embedding backward",
                                  "embedding update"};
    // Several ranks: the collectives as parts of their own, cut out of the parts around them
    // (the embedding's exchanges, the dense gradients' all-reduce).
    if (ranks > 1) want.insert({"collective: all-to-all", "collective: all-reduce"});
    EXPECT_EQ(device, want) << ranks << " ranks";

    // train_step() is timed too; without the timer nothing more is counted.
    ASSERT_TRUE(profiled.train_step());
    EXPECT_EQ(timer.steps(), 7);
    profiled.set_part_timer(nullptr);
    ASSERT_TRUE(profiled.train_step());
    EXPECT_EQ(timer.steps(), 7);
  }
}

TEST(SessionParts, ATimerOfAnotherPlaceIsRefused) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 600);
  Session s(tiny_config(json, *data, 128, 2), quiet_options("cpu", 1));
  PartTimer timer(Place::cuda(0));
  EMBER_EXPECT_THROW_WITH(s.set_part_timer(&timer), Error, "the first rank trains on");
}

}  // namespace
}  // namespace ember::train
