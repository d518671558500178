// The in-process backend against plain loops, with n ranks as n threads.
#include "ember/distributed/collectives.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/test_support.hpp"

namespace ember {
namespace {

// Runs body(rank) on n threads over fresh communicators; rethrows the first rank's error.
void run_ranks(std::vector<distributed::CommunicatorPtr>& comms,
               const std::function<void(distributed::Communicator&)>& body) {
  testing::run_on_threads(static_cast<int>(comms.size()), [&](int r) { body(*comms[r]); });
}

std::vector<float> random_floats(std::int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v)
    x = dist(rng);
  return v;
}

class InProcessCollectives : public ::testing::TestWithParam<int> {};

TEST_P(InProcessCollectives, AllReduceReduceScatterAllGatherBroadcast) {
  const int n = GetParam();
  auto rng = testing::make_rng();
  for (std::int64_t block : {0, 1, 7, 1023}) {
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < n; ++r)
      inputs.push_back(random_floats(block * n, rng));
    std::vector<float> sum(block * n, 0.0f), mx(block * n, -1e30f);
    for (int r = 0; r < n; ++r) {
      for (std::int64_t i = 0; i < block * n; ++i) {
        sum[i] += inputs[r][i];
        mx[i] = std::max(mx[i], inputs[r][i]);
      }
    }
    auto comms = distributed::make_in_process_communicators(n);
    run_ranks(comms, [&](distributed::Communicator& c) {
      const int r = c.rank();
      EXPECT_EQ(c.size(), n);
      Tensor t = Tensor::from_vector(inputs[r]);
      c.all_reduce(t);
      EXPECT_EQ(t.to_vector<float>(), sum);  // rank-order sums are identical everywhere
      Tensor m = Tensor::from_vector(inputs[r]);
      c.all_reduce(m, distributed::ReduceOp::Max);
      EXPECT_EQ(m.to_vector<float>(), mx);

      Tensor out = Tensor::empty({block});
      c.reduce_scatter(Tensor::from_vector(inputs[r]), out);
      const auto got = out.to_vector<float>();
      for (std::int64_t i = 0; i < block; ++i)
        EXPECT_EQ(got[i], sum[r * block + i]);

      Tensor mine =
          Tensor::from_vector(std::vector<float>(inputs[r].begin(), inputs[r].begin() + block));
      Tensor gathered = Tensor::empty({block * n});
      c.all_gather(mine, gathered);
      const auto g = gathered.to_vector<float>();
      for (int p = 0; p < n; ++p) {
        for (std::int64_t i = 0; i < block; ++i)
          EXPECT_EQ(g[p * block + i], inputs[p][i]);
      }

      Tensor b = Tensor::from_vector(inputs[r]);
      c.broadcast(b, n - 1);
      EXPECT_EQ(b.to_vector<float>(), inputs[n - 1]);
      c.barrier();
    });
  }
}

TEST_P(InProcessCollectives, AllToAllVariableSizes) {
  const int n = GetParam();
  auto rng = testing::make_rng();
  // counts[s][d]: elements rank s sends rank d (some zero).
  std::vector<std::vector<std::int64_t>> counts(n, std::vector<std::int64_t>(n));
  for (auto& row : counts) {
    for (auto& c : row)
      c = static_cast<std::int64_t>(rng() % 5 == 0 ? 0 : rng() % 40);
  }
  std::vector<std::vector<std::int64_t>> data(n);
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      for (std::int64_t i = 0; i < counts[s][d]; ++i)
        data[s].push_back(s * 1000000 + d * 1000 + i);
    }
  }
  auto comms = distributed::make_in_process_communicators(n);
  run_ranks(comms, [&](distributed::Communicator& c) {
    const int r = c.rank();
    std::vector<std::int64_t> recv_counts(n);
    std::int64_t total = 0;
    for (int s = 0; s < n; ++s)
      total += (recv_counts[s] = counts[s][r]);
    Tensor send = Tensor::from_vector(data[r].empty() ? std::vector<std::int64_t>{-1} : data[r]);
    Tensor recv = Tensor::full({total + 3}, -7, DType::I64);
    c.all_to_all_v(send, counts[r], recv, recv_counts);
    const auto got = recv.to_vector<std::int64_t>();
    std::int64_t k = 0;
    for (int s = 0; s < n; ++s) {
      for (std::int64_t i = 0; i < counts[s][r]; ++i, ++k) {
        ASSERT_EQ(got[k], s * 1000000 + r * 1000 + i);
      }
    }
    EXPECT_EQ(got[total], -7);  // nothing written past the counts
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InProcessCollectives, ::testing::Values(1, 2, 3, 4));

TEST(InProcessCollectivesErrors, MismatchedCallsThrowOnEveryRank) {
  auto comms = distributed::make_in_process_communicators(2);
  std::vector<std::string> messages(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        Tensor t = Tensor::zeros({r == 0 ? 5 : 6});
        comms[r]->all_reduce(t);
      } catch (const Error& e) {
        messages[r] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (const auto& m : messages) {
    EXPECT_NE(m.find("mismatched"), std::string::npos) << m;
    EXPECT_NE(m.find("5 elements"), std::string::npos) << m;
    EXPECT_NE(m.find("6 elements"), std::string::npos) << m;
  }
  // The group stays broken rather than deadlocking later.
  EXPECT_THROW(comms[0]->barrier(), Error);
}

TEST(InProcessCollectivesErrors, AllToAllCountMismatchNamesRanks) {
  auto comms = distributed::make_in_process_communicators(2);
  std::vector<std::string> messages(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        Tensor buf = Tensor::zeros({8});
        // Rank 1 expects 3 from rank 0, which sends 2.
        comms[r]->all_to_all_v(
            buf, {2, 2}, buf.clone(),
            r == 1 ? std::vector<std::int64_t>{3, 2} : std::vector<std::int64_t>{2, 2});
      } catch (const Error& e) {
        messages[r] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (const auto& m : messages) {
    EXPECT_NE(m.find("rank 1 expects 3 elements from rank 0"), std::string::npos) << m;
  }
}

TEST(InProcessCollectivesErrors, MissingRankTimesOutInsteadOfHanging) {
  auto comms = distributed::make_in_process_communicators(3, 0.2);
  std::string message;
  std::thread t([&] {
    try {
      comms[0]->barrier();
    } catch (const Error& e) {
      message = e.what();
    }
  });
  t.join();
  EXPECT_NE(message.find("never arrived"), std::string::npos) << message;
  EXPECT_NE(message.find("1, 2"), std::string::npos) << message;
}

// A rank that fails frees the ranks waiting for it at once, long before the timeout; every later
// call throws too, naming the failed rank and its error.
TEST(InProcessCollectivesErrors, AnAbortedRankFreesItsWaitingPeersAtOnce) {
  auto comms = distributed::make_in_process_communicators(3, 300.0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> messages(2);
  std::vector<std::thread> waiting;
  for (int r = 0; r < 2; ++r) {
    waiting.emplace_back([&, r] {
      try {
        Tensor t = Tensor::full({7}, 1.0);
        comms[r]->all_reduce(t);
      } catch (const Error& e) {
        messages[r] = e.what();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  comms[2]->abort("a key is out of range");
  for (auto& t : waiting)
    t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(messages[r].find("the communicator group is broken: rank 2 failed: a key is out of "
                               "range"),
              std::string::npos)
        << messages[r];
  }
  EMBER_EXPECT_THROW_WITH(comms[0]->barrier(), Error, "rank 2 failed");
}

TEST(InProcessCollectivesErrors, BadArguments) {
  auto comms = distributed::make_in_process_communicators(1);
  EXPECT_THROW(comms[0]->all_reduce(Tensor::zeros({4}, DType::F16)), Error);
  EXPECT_THROW(comms[0]->reduce_scatter(Tensor::zeros({4}), Tensor::zeros({3})), Error);
  EXPECT_THROW(comms[0]->all_to_all_v(Tensor::zeros({4}), {5}, Tensor::zeros({5}), {5}), Error);
  EXPECT_THROW(comms[0]->broadcast(Tensor::zeros({4}), 1), Error);
  EXPECT_THROW(distributed::make_in_process_communicators(0), Error);
}

// Every backend runs the same argument checks (Communicator::check_*): a one-rank in-process
// group and a solo communicator refuse the same bad calls with the same messages.
TEST(CollectiveArgumentChecks, SameForEveryBackend) {
  auto group = distributed::make_in_process_communicators(1);
  const distributed::CommunicatorPtr solo = distributed::make_solo_communicator(Place::host());
  const Tensor four = Tensor::zeros({4}), three = Tensor::zeros({3});
  const std::vector<std::pair<const char*, std::function<void(distributed::Communicator&)>>> calls =
      {
          {"dtype", [&](auto& c) { c.all_reduce(Tensor::zeros({4}, DType::F16)); }},
          {"undefined", [&](auto& c) { c.all_reduce(Tensor()); }},
          {"contiguous",
           [&](auto& c) {
             c.all_reduce(Tensor::zeros({4, 4}).transpose(0, 1));
           }},
          {"expected 1 x 3", [&](auto& c) { c.reduce_scatter(four, three); }},
          {"expected 1 x 4", [&](auto& c) { c.all_gather(four, three); }},
          {"but output is i64",
           [&](auto& c) { c.all_gather(four, Tensor::zeros({4}, DType::I64)); }},
          {"add up to 5", [&](auto& c) { c.all_to_all_v(four, {5}, Tensor::zeros({5}), {5}); }},
          {"2 entries for 1 ranks",
           [&](auto& c) {
             c.all_to_all_v(four, {1, 1}, four, {2});
           }},
          {"negative count", [&](auto& c) { c.all_to_all_v(four, {1}, four, {-1}); }},
          {"root 1 is not a rank of 1", [&](auto& c) { c.broadcast(four, 1); }},
      };
  for (const auto& [text, call] : calls) {
    std::string messages[2];
    int i = 0;
    for (distributed::Communicator* c : {group[0].get(), solo.get()}) {
      try {
        call(*c);
        ADD_FAILURE() << c->backend() << " accepted the call expected to fail with \"" << text
                      << "\"";
      } catch (const Error& e) {
        messages[i] = e.what();
      }
      EXPECT_NE(messages[i].find(text), std::string::npos) << c->backend() << ": " << messages[i];
      ++i;
    }
    EXPECT_EQ(messages[0], messages[1]);
  }
}

}  // namespace
}  // namespace ember
