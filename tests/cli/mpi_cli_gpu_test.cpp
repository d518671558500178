// Training over MPI on GPUs (NCCL over all processes, its id broadcast through MPI) against one
// process: with one GPU, `mpirun -np 1 ember train --mpi` (the multi-process path: MPI, then
// NCCL's ncclCommInitRank) against a plain run; with N >= 2 GPUs also one process per GPU
// (solver.gpu one list per process; the GPUs gather the one-hot keys over NCCL, for the hash,
// one-hot and hybrid layers) and one process driving all N over MPI, against one process with
// all N GPUs, and that against one GPU (the same global batch). Summation orders may differ
// between NCCL's algorithms: close, not equal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "cli/mpi_run_support.hpp"
#include "ember/core/device.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

void expect_same_training(const Outcome& reference, const Outcome& got, const char* what) {
  SCOPED_TRACE(what);
  const auto a = numbers_of(reference.out), b = numbers_of(got.out);
  ASSERT_EQ(a.size(), b.size()) << got.out << got.err;
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"loss", "AUC", "AverageLoss"}) {
      const double x = value_of_key(a[i], key), y = value_of_key(b[i], key);
      EXPECT_NEAR(y, x, 1e-3 * std::max(1.0, std::fabs(x))) << a[i] << " | " << b[i];
    }
  }
}

TEST(MpiCliGpu, ProcessesOnGpusTrainAsOneProcess) {
  EMBER_REQUIRE_GPU();
  EMBER_REQUIRE_MPI();
  testing::ScratchDir dir;
  const Outcome g = ember("datagen --like '" + config_path("dlrm") + "' --out '" +
                              (dir / "data").string() + "' --samples 6000",
                          dir);
  ASSERT_EQ(g.status, 0) << g.err;
  // The heuristic's cuBLASLt algorithms (no timing): a timed search may pick another algorithm
  // in each run when other work shares the GPU (gpu-check runs tests side by side), and the
  // runs are compared bit for bit.
  const std::string args = train_args(config_path("dlrm"), (dir / "data").string(), "cuda") +
                           " --set solver.algorithm_search=false";
  const int gpus = cuda_device_count();

  const Outcome plain = run_in(0, args + " --gpus 0", dir);
  ASSERT_EQ(plain.status, 0) << plain.err;
  const Outcome over_mpi = run_in(1, args + " --gpus 0 --mpi", dir);
  ASSERT_EQ(over_mpi.status, 0) << over_mpi.err;
  expect_same_training(plain, over_mpi, "one GPU, one process over MPI and NCCL");
  EXPECT_EQ(numbers_of(over_mpi.out), numbers_of(plain.out)) << "not bit-identical (reported)";

  if (gpus < 2) {
    std::printf("[   INFO   ] one GPU visible: the multi-GPU comparisons are skipped\n");
    return;
  }
  std::string all, lists;
  for (int d = 0; d < gpus; ++d) {
    if (d > 0) {
      all += ',';
      lists += ',';
    }
    all += std::to_string(d);
    lists += '[' + std::to_string(d) + ']';
  }
  const Outcome one_process = run_in(0, args + " --gpus " + all, dir);
  ASSERT_EQ(one_process.status, 0) << one_process.err;
  // The same global batch over N GPUs (the embedding sharded, the dense gradients all-reduced)
  // trains the model of one GPU.
  expect_same_training(plain, one_process, "every GPU of one process against one GPU");
  const Outcome per_gpu = run_in(gpus, args + " --set 'solver.gpu=[" + lists + "]'", dir);
  ASSERT_EQ(per_gpu.status, 0) << per_gpu.err;
  EXPECT_THAT(per_gpu.err, HasSubstr("in each of " + std::to_string(gpus) + " processes"));
  // The data is one-hot: the GPUs gather the keys of the training batches over NCCL.
  EXPECT_THAT(per_gpu.err, ContainsRegex("keys of [1-9][0-9]* batches gathered by the ranks"));
  expect_same_training(one_process, per_gpu, "one process per GPU");
  // The layers that prepare the next batch ahead from its keys (after the gather).
  for (const char* type : {"LocalizedSlotSparseEmbeddingOneHot", "HybridSparseEmbedding"}) {
    const std::string with = args + " --set layers.sparse_embedding1.type=" + type;
    const Outcome one = run_in(0, with + " --gpus " + all, dir);
    ASSERT_EQ(one.status, 0) << one.err;
    const Outcome each = run_in(gpus, with + " --set 'solver.gpu=[" + lists + "]'", dir);
    ASSERT_EQ(each.status, 0) << each.err;
    EXPECT_THAT(each.err, ContainsRegex("keys of [1-9][0-9]* batches gathered by the ranks"));
    expect_same_training(one, each, type);
  }
  const Outcome all_over_mpi = run_in(1, args + " --gpus " + all + " --mpi", dir);
  ASSERT_EQ(all_over_mpi.status, 0) << all_over_mpi.err;
  expect_same_training(one_process, all_over_mpi, "one process, every GPU, over MPI");
}

}  // namespace
}  // namespace ember
