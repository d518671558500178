// Per-device resources: created once, distinct streams, the peer matrix, cuBLAS and cuRAND.
#include "ember/tensor/device_resources.hpp"

#include <gtest/gtest.h>

#include "ember/core/stream.hpp"
#include "ember/tensor/tensor.hpp"
#include "support/test_support.hpp"

#if EMBER_WITH_CUDA
#include <curand.h>
#endif

namespace ember {
namespace {

TEST(DeviceResourcesGpu, CreatedOncePerDeviceWithDistinctStreams) {
  EMBER_REQUIRE_GPU();
  DeviceResources& a = DeviceResources::get(0);
  DeviceResources& b = DeviceResources::get(0);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(a.device(), 0);
  EXPECT_NE(a.compute_stream(), nullptr);
  EXPECT_NE(a.copy_stream(), nullptr);
  EXPECT_NE(a.compute_stream(), a.copy_stream());
  EXPECT_EQ(a.compute_stream(), default_stream(0));
  EXPECT_NE(a.cublas(), nullptr);
  EXPECT_NE(a.curand(), nullptr);
  EXPECT_THROW(DeviceResources::get(cuda_device_count()), Error);
}

TEST(DeviceResourcesGpu, PeerMatrixHasATrueDiagonal) {
  EMBER_REQUIRE_GPU();
  const int n = cuda_device_count();
  for (int d = 0; d < n; ++d) {
    EXPECT_TRUE(DeviceResources::can_access_peer(d, d)) << d;
    for (int e = 0; e < n; ++e) {
      // Symmetric on every machine Ember targets (NVLink or PCIe peers).
      EXPECT_EQ(DeviceResources::can_access_peer(d, e), DeviceResources::can_access_peer(e, d));
    }
  }
  EXPECT_THROW(DeviceResources::can_access_peer(0, n), Error);
}

TEST(DeviceResourcesGpu, GuardRestoresTheCurrentDevice) {
  EMBER_REQUIRE_GPU();
  const int before = current_device();
  {
    DeviceGuard guard(cuda_device_count() - 1);
    EXPECT_EQ(current_device(), cuda_device_count() - 1);
  }
  EXPECT_EQ(current_device(), before);
}

TEST(DeviceResourcesGpu, EventsTimeWorkOnTheComputeStream) {
  EMBER_REQUIRE_GPU();
  DeviceResources& r = DeviceResources::get(0);
  Event start = r.make_event(true), end = r.make_event(true);
  const Tensor x = Tensor::zeros({1 << 20}, DType::F32, Place::cuda(0));
  const Tensor ones = Tensor::ones({1 << 20}, DType::F32, Place::cuda(0));
  start.record(r.compute_stream());
  x.copy_from(ones, r.compute_stream());
  end.record(r.compute_stream());
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GE(Event::elapsed_ms(start, end), 0.0f);
  EXPECT_EQ(x.get<float>({12345}), 1.0f);
}

TEST(DeviceResourcesGpu, CurandGeneratesSeededUniformNumbers) {
  EMBER_REQUIRE_GPU();
#if EMBER_WITH_CUDA
  DeviceResources& r = DeviceResources::get(0);
  const std::int64_t n = 100000;
  const Tensor first = Tensor::empty({n}, DType::F32, Place::cuda(0));
  const Tensor second = Tensor::empty({n}, DType::F32, Place::cuda(0));
  ASSERT_EQ(curandSetStream(r.curand(), r.compute_stream()), CURAND_STATUS_SUCCESS);
  r.set_seed(42);
  ASSERT_EQ(curandGenerateUniform(r.curand(), first.data<float>(), n), CURAND_STATUS_SUCCESS);
  r.set_seed(42);
  ASSERT_EQ(curandGenerateUniform(r.curand(), second.data<float>(), n), CURAND_STATUS_SUCCESS);
  synchronize_stream(r.compute_stream());
  const auto a = first.to(Place::host()).to_vector<float>();
  const auto b = second.to(Place::host()).to_vector<float>();
  EXPECT_EQ(a, b);
  double mean = 0;
  for (float v : a) {
    ASSERT_GT(v, 0.0f);  // cuRAND's uniform is (0, 1]
    ASSERT_LE(v, 1.0f);
    mean += v;
  }
  EXPECT_NEAR(mean / n, 0.5, 0.01);
#endif
}

}  // namespace
}  // namespace ember
