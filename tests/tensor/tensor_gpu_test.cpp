// Tensors on CUDA places: moving between places, asynchronous copies on a stream, views of device
// memory, element access through the host, printing, random creation, CSR tensors.
#include <gtest/gtest.h>

#include "ember/core/stream.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/sparse.hpp"
#include "ember/tensor/tensor.hpp"
#include "support/test_support.hpp"
#include "tensor/op_test_util.hpp"

namespace ember {
namespace {

const Place kGpu = Place::cuda(0);

TEST(TensorGpu, RoundTripsEveryDType) {
  EMBER_REQUIRE_GPU();
  auto rng = testing::make_rng();
  for (DType dtype : kAllDTypes) {
    const auto values = testing::random_values(rng, 1023, DType::I32, 0, 1);
    const Tensor h = testing::host_tensor(values, {1023}, dtype);
    const Tensor d = h.to(kGpu);
    EXPECT_EQ(d.place(), kGpu);
    EXPECT_EQ(d.dtype(), dtype);
    EXPECT_TRUE(
        testing::values_match(testing::read_as_double(d.to(Place::host())), values, dtype, 0.0))
        << dtype_name(dtype);
  }
}

TEST(TensorGpu, AsyncCopyFromOnAStream) {
  EMBER_REQUIRE_GPU();
  Stream stream = Stream::create(0);
  const std::int64_t n = 1 << 20;
  const Tensor pinned = Tensor::empty({n}, DType::F32, Place::pinned());
  float* p = pinned.data<float>();
  for (std::int64_t i = 0; i < n; ++i)
    p[i] = static_cast<float>(i % 1000);
  const Tensor device = Tensor::empty({n}, DType::F32, kGpu);
  device.copy_from(pinned, stream.handle());
  const Tensor back = Tensor::zeros({n}, DType::F32, Place::pinned());
  back.copy_from(device, stream.handle());
  stream.synchronize();
  const float* q = back.data<float>();
  for (std::int64_t i = 0; i < n; i += 997)
    ASSERT_EQ(q[i], static_cast<float>(i % 1000)) << i;
  // Strided views on either side, across places.
  const Tensor grid = Tensor::arange(12, DType::F32).reshape({3, 4});
  const Tensor d = Tensor::zeros({4, 3}, DType::F32, kGpu);
  d.copy_from(grid.transpose(0, 1), stream.handle());
  stream.synchronize();
  EXPECT_EQ(d.to(Place::host()).to_vector<float>(),
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  const Tensor h = Tensor::zeros({3, 4});
  h.copy_from(d.transpose(0, 1));
  EXPECT_EQ(h.to_vector<float>(), grid.to_vector<float>());
}

TEST(TensorGpu, DeviceViewsAliasAndElementAccessGoesThroughTheHost) {
  EMBER_REQUIRE_GPU();
  const Tensor t = Tensor::arange(24, DType::F32, kGpu).reshape({2, 3, 4});
  const Tensor p = t.permute({2, 0, 1});
  const Tensor s = t.slice(2, 1, 4, 2);
  p.set<float>({3, 1, 2}, -1.0f);  // element [1, 2, 3]
  EXPECT_EQ(t.get<float>({1, 2, 3}), -1.0f);
  EXPECT_EQ(s.get<float>({1, 2, 1}), -1.0f);
  EXPECT_EQ(t.allocation(), p.allocation());
  EXPECT_EQ(s.contiguous().to(Place::host()).to_vector<float>(),
            (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, -1}));
  EXPECT_EQ(Tensor::full({}, 2.5, DType::F64, kGpu).item<double>(), 2.5);
}

TEST(TensorGpu, PrintingShowsThePlace) {
  EMBER_REQUIRE_GPU();
  const Tensor t = Tensor::arange(6, DType::I32, kGpu).reshape({2, 3});
  EXPECT_EQ(t.to_string(), "Tensor(i32, [2, 3], cuda:0) [[0, 1, 2], [3, 4, 5]]");
}

TEST(TensorGpu, RandomTensorsAreTheSameOnEveryPlace) {
  EMBER_REQUIRE_GPU();
  for (DType dtype : testing::kFloatingDTypes) {
    const Tensor h = Tensor::normal({4097}, 0.5, 2.0, 99, dtype);
    const Tensor d = Tensor::normal({4097}, 0.5, 2.0, 99, dtype, kGpu);
    EXPECT_TRUE(testing::values_match(testing::read_as_double(d.to(Place::host())),
                                      testing::read_as_double(h), dtype, 0.0));
  }
}

TEST(TensorGpu, CsrTensorsMoveToTheDeviceAndBack) {
  EMBER_REQUIRE_GPU();
  CsrBuilder<std::int64_t> builder(5, 20, Place::pinned());
  for (int r = 0; r < 5; ++r) {
    builder.new_row();
    for (int j = 0; j < r; ++j)
      builder.push_back(r * 10 + j);
  }
  const CsrTensor device = builder.view().to(kGpu);
  EXPECT_EQ(device.place(), kGpu);
  EXPECT_EQ(device.nnz(), 10);
  EXPECT_EQ(device.to_dense(4, -1).to_vector<std::int64_t>(),
            builder.view().to_dense(4, -1).to_vector<std::int64_t>());
}

}  // namespace
}  // namespace ember
