// The NCCL backend on the machine's GPU(s), one thread per rank, against plain host loops.
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>

#include "ember/core/allocator.hpp"
#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

// One NCCL rank per visible GPU, rank r on device r.
std::vector<distributed::CommunicatorPtr> every_device() {
  std::vector<int> devices;
  for (int d = 0; d < cuda_device_count(); ++d)
    devices.push_back(d);
  return distributed::make_nccl_communicators(devices);
}

// Runs body(r) for every rank at once, each on its own thread with its device current; rethrows
// the first rank's error.
void on_every_rank(const std::vector<distributed::CommunicatorPtr>& comms,
                   const std::function<void(int)>& body) {
  testing::run_on_threads(static_cast<int>(comms.size()), [&](int r) {
    DeviceGuard guard(comms[static_cast<std::size_t>(r)]->place().device());
    body(r);
  });
}

TEST(NcclCollectives, MatchHostLoops) {
  EMBER_REQUIRE_GPU();
  if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  auto comms = every_device();
  const int n = static_cast<int>(comms.size());
  auto rng = testing::make_rng();
  const std::int64_t block = 1023;
  std::vector<std::vector<float>> inputs(n);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto& in : inputs) {
    for (std::int64_t i = 0; i < block * n; ++i)
      in.push_back(dist(rng));
  }
  std::vector<double> sum(block * n, 0.0);
  for (const auto& in : inputs) {
    for (std::int64_t i = 0; i < block * n; ++i)
      sum[i] += in[i];
  }
  on_every_rank(comms, [&](int r) {
    distributed::Communicator& c = *comms[r];
    const Place p = c.place();
    EXPECT_EQ(p, Place::cuda(r));
    Tensor t = Tensor::from_vector(inputs[r], p);
    c.all_reduce(t);
    Tensor out = Tensor::empty({block}, DType::F32, p);
    c.reduce_scatter(Tensor::from_vector(inputs[r], p), out);
    Tensor gathered = Tensor::empty({block * n}, DType::F32, p);
    c.all_gather(Tensor::from_vector(inputs[r], p).slice(0, 0, block), gathered);
    // all_to_all_v: rank r sends (r + 1) * (d + 1) i64 values to rank d.
    std::vector<std::int64_t> send_counts(n), recv_counts(n), send;
    for (int d = 0; d < n; ++d) {
      send_counts[d] = (r + 1) * (d + 1);
      recv_counts[d] = (d + 1) * (r + 1);
      for (std::int64_t i = 0; i < send_counts[d]; ++i)
        send.push_back(r * 1000 + d * 100 + i);
    }
    std::int64_t total = 0;
    for (auto c2 : recv_counts)
      total += c2;
    Tensor recv = Tensor::empty({total}, DType::I64, p);
    c.all_to_all_v(Tensor::from_vector(send, p), send_counts, recv, recv_counts);
    c.barrier();
    synchronize_stream(current_stream(r));
    const auto got = t.to_vector<float>();
    for (std::int64_t i = 0; i < block * n; ++i)
      EXPECT_NEAR(got[i], sum[i], 1e-5);
    const auto scattered = out.to_vector<float>();
    for (std::int64_t i = 0; i < block; ++i)
      EXPECT_NEAR(scattered[i], sum[r * block + i], 1e-5);
    const auto g = gathered.to_vector<float>();
    for (int q = 0; q < n; ++q) {
      for (std::int64_t i = 0; i < block; ++i)
        EXPECT_EQ(g[q * block + i], inputs[q][i]);
    }
    const auto a2a = recv.to_vector<std::int64_t>();
    std::int64_t k = 0;
    for (int s = 0; s < n; ++s) {
      for (std::int64_t i = 0; i < recv_counts[s]; ++i)
        EXPECT_EQ(a2a[k++], s * 1000 + r * 100 + i);
    }
  });
}

// One process, one thread per GPU. Rank 0 queues an all-reduce and at once copies its result to
// pageable memory (the driver's copy waits for the collective, which waits for the other ranks);
// the other ranks first pin a large host buffer and allocate device memory, and only then queue
// theirs. Deadlocks have been reported there (the pageable copy holding locks that cudaHostAlloc
// and cudaMalloc need); on this driver it must not, since Ember's ranks do exactly that.
TEST(NcclCollectives, APageableCopyBesideAnotherRanksAllocationsFinishes) {
  EMBER_REQUIRE_GPU();
  if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 or more GPUs";
  auto comms = every_device();
  const int n = static_cast<int>(comms.size());
  on_every_rank(comms, [&](int r) {
    distributed::Communicator& c = *comms[r];
    const Place p = c.place();
    Tensor t = Tensor::full({7}, static_cast<double>(r + 1), DType::F32, p);
    if (r != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      AllocationPtr pinned =
          Allocation::create(raw_allocator(Place::pinned()), std::size_t{256} << 20);
      AllocationPtr device = Allocation::create(raw_allocator(p), std::size_t{256} << 20);
    }
    c.all_reduce(t);
    for (float v : t.to_vector<float>())
      EXPECT_EQ(v, static_cast<float>(n * (n + 1) / 2)) << "rank " << r;
  });
}

// A GPU rank that fails frees the ranks waiting for it inside NCCL kernels: abort() aborts the
// group's communicators, the kernels end, and every later call throws naming the failed rank.
TEST(NcclCollectives, AnAbortedRankFreesThePeersWaitingOnTheirDevices) {
  EMBER_REQUIRE_GPU();
  if (!distributed::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 or more GPUs";
  auto comms = every_device();
  const int n = static_cast<int>(comms.size());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> messages(n);
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        DeviceGuard guard(r);
        Tensor t = Tensor::full({1023}, 1.0, DType::F32, comms[r]->place());
        comms[r]->all_reduce(t);
        comms[r]->barrier();  // waits on the device for rank 0, which never comes
      } catch (const Error& e) {
        messages[r] = e.what();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  comms[0]->abort("a key is out of range");
  for (auto& t : threads)
    t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  for (int r = 1; r < n; ++r) {
    EXPECT_NE(messages[r].find("the communicator group is broken: rank 0 failed: a key is out of "
                               "range"),
              std::string::npos)
        << "rank " << r << ": " << messages[r];
  }
  Tensor t = Tensor::full({7}, 1.0, DType::F32, comms[0]->place());
  EMBER_EXPECT_THROW_WITH(comms[0]->all_reduce(t), Error, "rank 0 failed");
}

}  // namespace
}  // namespace ember
