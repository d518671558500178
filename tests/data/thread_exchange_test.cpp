// The in-process rendezvous that stands for a job's processes in the shared-reading tests.
#include "ember/data/thread_exchange.hpp"

#include <gtest/gtest.h>

#include <future>
#include <string>

#include "ember/core/error.hpp"

namespace ember::data {
namespace {

std::vector<std::byte> message(std::uint8_t v) {
  return {std::byte{v}, std::byte{static_cast<std::uint8_t>(v + 1)}};
}

TEST(ThreadRendezvous, RoundsReturnEveryMessageInParticipantOrder) {
  ThreadRendezvous hub(3);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::future<std::vector<std::vector<std::byte>>>> got;
    for (int p = 0; p < 3; ++p) {
      got.push_back(std::async(std::launch::async, [&, p] {
        return hub.arrive(p, message(static_cast<std::uint8_t>(10 * round + p)));
      }));
    }
    for (auto& f : got) {
      const auto all = f.get();
      ASSERT_EQ(all.size(), 3u);
      for (int p = 0; p < 3; ++p)
        EXPECT_EQ(all[p], message(static_cast<std::uint8_t>(10 * round + p))) << round << " " << p;
    }
  }
}

// A participant whose wait timed out is not counted in the next round: that round still waits
// for every participant and returns each one's message, not an empty one in a missing one's place.
TEST(ThreadRendezvous, AnArrivalThatTimedOutIsTakenBack) {
  ThreadRendezvous hub(2, std::chrono::seconds(1));
  try {
    hub.arrive(0, message(1));
    FAIL() << "a lone arrival did not time out";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 of 2 processes never reached the exchange"),
              std::string::npos)
        << e.what();
  }
  auto first = std::async(std::launch::async, [&] { return hub.arrive(0, message(5)); });
  auto second = std::async(std::launch::async, [&] { return hub.arrive(1, message(7)); });
  for (auto* f : {&first, &second}) {
    const auto all = f->get();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0], message(5));
    EXPECT_EQ(all[1], message(7));
  }
}

}  // namespace
}  // namespace ember::data
