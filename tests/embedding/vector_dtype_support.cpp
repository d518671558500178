#include "vector_dtype_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"

namespace ember::embedding::testing {

HostBatch onehot_batch(std::int64_t batch, const std::vector<std::int64_t>& slot_sizes,
                       std::mt19937_64& rng) {
  HostBatch h;
  h.batch = batch;
  h.offsets.push_back(0);
  std::vector<std::int64_t> begin(slot_sizes.size() + 1, 0);
  for (std::size_t s = 0; s < slot_sizes.size(); ++s)
    begin[s + 1] = begin[s] + slot_sizes[s];
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::size_t s = 0; s < slot_sizes.size(); ++s) {
      const auto size = static_cast<double>(slot_sizes[s]);
      const auto rank = static_cast<std::int64_t>(std::exp(u(rng) * std::log(size + 1.0))) - 1;
      h.keys.push_back(begin[s] + std::min<std::int64_t>(rank, slot_sizes[s] - 1));
      h.offsets.push_back(static_cast<std::int64_t>(h.keys.size()));
    }
  }
  return h;
}

std::vector<float> round_through(const std::vector<float>& values, DType dtype) {
  if (dtype == DType::F32 || values.empty()) return values;
  return Tensor::from_vector(values).to(dtype).to(DType::F32).to_vector<float>();
}

kernels::ValueType value_type_of(DType dtype) {
  return dtype == DType::F16    ? kernels::ValueType::F16
         : dtype == DType::BF16 ? kernels::ValueType::BF16
                                : kernels::ValueType::F32;
}

DtypeRun run_with_dtypes(const Problem& problem, Place place, DType out_dtype, DType grad_dtype) {
  const std::int64_t S = problem.config.slot_num, V = problem.config.vec_size;
  const distributed::CommunicatorPtr comm = distributed::make_solo_communicator(place);
  SparseEmbedding emb(problem.config, problem.optimizer, *comm);
  DtypeRun run;
  for (std::size_t t = 0; t < problem.batches.size(); ++t) {
    const HostBatch& h = problem.batches[t];
    const Tensor keys = Tensor::from_vector(h.keys.empty() ? std::vector<std::int64_t>{0} : h.keys)
                            .to(problem.config.key_dtype);
    const CsrTensor csr(Tensor::from_vector(h.offsets, place), keys.to(place),
                        static_cast<std::int64_t>(h.keys.size()));
    const Tensor out = Tensor::empty({h.batch, S, V}, out_dtype, place);
    emb.forward_into(csr, 0, h.batch, out, problem.training[t]);
    run.outputs.push_back(out.to(Place::host()).to(DType::F32).to_vector<float>());
    if (!problem.training[t]) continue;
    const Tensor grad = Tensor::from_vector(problem.grads[t], Shape{h.batch, S, V}).to(grad_dtype);
    emb.backward(grad.to(place));
    emb.update(problem.loss_scaler);
  }
  if (place.is_cuda()) synchronize_stream(current_stream(place.device()));
  run.snapshot = emb.snapshot();
  return run;
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b,
                      const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::uint32_t x = 0, y = 0;
    std::memcpy(&x, &a[i], sizeof x);
    std::memcpy(&y, &b[i], sizeof y);
    ASSERT_EQ(x, y) << what << ": element " << i << " is " << a[i] << ", want " << b[i];
  }
}

void expect_same_dtype_runs(const DtypeRun& got, const DtypeRun& want, const std::string& what) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
  for (std::size_t t = 0; t < got.outputs.size(); ++t)
    expect_same_bits(got.outputs[t], want.outputs[t],
                     what + ", output of step " + std::to_string(t));
  EXPECT_EQ(got.snapshot.keys, want.snapshot.keys) << what;
  expect_same_bits(got.snapshot.vectors, want.snapshot.vectors, what + ", final model");
}

void expect_16bit_exchange_is_the_f32_one_rounded(Problem wide, int ranks, bool cuda, DType dtype,
                                                  const std::string& what) {
  for (auto& g : wide.grads)
    g = round_through(g, dtype);
  Problem narrow = wide;
  narrow.out_dtype = dtype;
  narrow.grad_dtype = dtype;
  const RunResult want = run_ranks(wide, ranks, cuda);
  const RunResult got = run_ranks(narrow, ranks, cuda);
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
  for (std::size_t t = 0; t < got.outputs.size(); ++t) {
    expect_same_bits(got.outputs[t], round_through(want.outputs[t], dtype),
                     what + ", step " + std::to_string(t));
  }
  EXPECT_EQ(got.snapshot.keys, want.snapshot.keys) << what;
  expect_same_bits(got.snapshot.vectors, want.snapshot.vectors, what + ", final model");
}

}  // namespace ember::embedding::testing
