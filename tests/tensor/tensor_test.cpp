#include "ember/tensor/tensor.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "ember/tensor/ops.hpp"
#include "ember/tensor/tensor_view.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

std::vector<float> iota(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(Tensor, CreationAndProperties) {
  Tensor t = Tensor::zeros({2, 3, 4});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_TRUE(t.is_contiguous());
  for (float v : t.to_vector<float>())
    EXPECT_EQ(v, 0.0f);
  // An empty tensor has no element out of place, whatever its zero dimension (a layer input with
  // no embeddings: [batch, 0, width]).
  EXPECT_TRUE(Tensor::zeros({7, 0, 4}).is_contiguous());
  EXPECT_TRUE(Tensor::zeros({0, 3}).is_contiguous());
  for (std::int64_t v : Tensor::ones({5}, DType::I64).to_vector<std::int64_t>())
    EXPECT_EQ(v, 1);
  for (double v : Tensor::full({3}, 2.5, DType::F64).to_vector<double>())
    EXPECT_EQ(v, 2.5);
  EXPECT_EQ(Tensor::arange(4, DType::I32).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(Tensor::arange(1, 2, 0.25, DType::F32).to_vector<float>(),
            (std::vector<float>{1, 1.25, 1.5, 1.75}));
  EXPECT_FALSE(Tensor().defined());
  Tensor scalar = Tensor::full({}, 7.0);
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.item<float>(), 7.0f);
  Tensor empty = Tensor::empty({0, 5});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.to_vector<float>().empty());
}

TEST(Tensor, EveryDTypeCanBeCreated) {
  for (DType t : kAllDTypes) {
    Tensor x = Tensor::full({7}, 1.0, t);
    EXPECT_EQ(x.dtype(), t);
    EXPECT_EQ(x.get_double({6}), 1.0) << dtype_name(t);
  }
}

TEST(Tensor, RandomIsSeededAndInRange) {
  Tensor a = Tensor::uniform({1023}, -2, 3, 42);
  Tensor b = Tensor::uniform({1023}, -2, 3, 42);
  Tensor c = Tensor::uniform({1023}, -2, 3, 43);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), c.to_vector<float>());
  for (float v : a.to_vector<float>()) {
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 3.0f);
  }
  const auto n = Tensor::normal({65537}, 1.0, 2.0, 7, DType::F64).to_vector<double>();
  double mean = 0, var = 0;
  for (double v : n)
    mean += v;
  mean /= static_cast<double>(n.size());
  for (double v : n)
    var += (v - mean) * (v - mean);
  var /= static_cast<double>(n.size());
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.05);
  EXPECT_THROW(Tensor::uniform({3}, 0, 1, 1, DType::I32), Error);
}

TEST(Tensor, ViewsAliasTheSameMemory) {
  Tensor t = Tensor::from_vector(iota(24), {2, 3, 4});
  Tensor r = t.reshape({6, 4});
  Tensor s = t.slice(2, 1, 4, 2);
  Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(r.allocation(), t.allocation());
  r.set<float>({5, 3}, -1.0f);  // element 23
  EXPECT_EQ(t.get<float>({1, 2, 3}), -1.0f);
  EXPECT_EQ(s.get<float>({1, 2, 1}), -1.0f);  // column 3 = index 1 of the stepped slice
  EXPECT_EQ(p.get<float>({3, 1, 2}), -1.0f);
  p.set<float>({0, 0, 0}, 100.0f);
  EXPECT_EQ(t.get<float>({0, 0, 0}), 100.0f);
  TensorView<float> view(t);
  view(1, 0, 0) = 55.0f;
  EXPECT_EQ(t.get<float>({1, 0, 0}), 55.0f);
  EXPECT_THROW(TensorView<double>{t}, Error);
  const Tensor& back = view;
  EXPECT_EQ(back.allocation(), t.allocation());
}

TEST(Tensor, SliceAndPermuteMatchHandIndexArithmetic) {
  auto rng = testing::make_rng();
  const Shape shape{5, 7, 6};
  Tensor t = Tensor::from_vector(iota(shape.numel()), shape);
  for (int trial = 0; trial < 50; ++trial) {
    const int dim = static_cast<int>(rng() % 3);
    const std::int64_t n = shape[dim];
    const std::int64_t start = static_cast<std::int64_t>(rng() % n);
    const std::int64_t stop = start + static_cast<std::int64_t>(rng() % (n - start + 1));
    const std::int64_t step = 1 + static_cast<std::int64_t>(rng() % 3);
    Tensor s = t.slice(dim, start, stop, step).permute({2, 0, 1});
    const std::vector<float> got = s.to_vector<float>();  // row-major over the permuted view
    std::size_t k = 0;
    for (std::int64_t c = 0; c < s.size(0); ++c) {
      for (std::int64_t a = 0; a < s.size(1); ++a) {
        for (std::int64_t b = 0; b < s.size(2); ++b) {
          std::int64_t idx[3] = {a, b, c};
          idx[dim] = start + idx[dim] * step;
          const float expect = static_cast<float>(idx[0] * 42 + idx[1] * 6 + idx[2]);
          ASSERT_EQ(got[k++], expect)
              << "dim " << dim << " " << start << ":" << stop << ":" << step;
        }
      }
    }
    EXPECT_EQ(k, got.size());
  }
}

TEST(Tensor, SliceClampsAndCountsFromTheEnd) {
  Tensor t = Tensor::from_vector(iota(10));
  EXPECT_EQ(t.slice(0, -3, 100).to_vector<float>(), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(t.slice(0, 8, 2).numel(), 0);
  EXPECT_EQ(t.slice(0, 1, 10, 4).to_vector<float>(), (std::vector<float>{1, 5, 9}));
  EXPECT_THROW(t.slice(0, 0, 5, 0), Error);
  EXPECT_THROW(t.slice(1, 0, 5), Error);
}

TEST(Tensor, SelectTransposeSqueeze) {
  Tensor t = Tensor::from_vector(iota(12), {3, 4});
  EXPECT_EQ(t.select(0, 1).to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(t.select(1, -1).to_vector<float>(), (std::vector<float>{3, 7, 11}));
  EXPECT_EQ(t.transpose(0, 1).contiguous().to_vector<float>(),
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(t.unsqueeze(2).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(t.unsqueeze(1).squeeze(1).shape(), (Shape{3, 4}));
  EXPECT_THROW(t.squeeze(0), Error);
  EXPECT_THROW(t.select(0, 3), Error);
  EXPECT_THROW(t.permute({0, 0}), Error);
}

TEST(Tensor, ReshapeInfersAndRejects) {
  Tensor t = Tensor::zeros({4, 6});
  EXPECT_EQ(t.reshape({-1, 3}).shape(), (Shape{8, 3}));
  EXPECT_EQ(t.flatten().shape(), (Shape{24}));
  try {
    t.transpose(0, 1).reshape({24});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("non-contiguous"), std::string::npos) << e.what();
  }
  try {
    t.reshape({5, 5});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[5, 5]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 6]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.reshape({-1, -1}), Error);
  EXPECT_THROW(t.reshape({-1, 7}), Error);
}

TEST(Tensor, ExpandBroadcastsWithZeroStride) {
  Tensor row = Tensor::from_vector(std::vector<float>{1, 2, 3});
  Tensor m = row.expand({2, 3});
  EXPECT_EQ(m.strides(), (Strides{0, 1}));
  EXPECT_EQ(m.contiguous().to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_THROW(row.expand({2, 4}), Error);
}

TEST(Tensor, CopyFromStridedAndBroadcast) {
  Tensor src = Tensor::from_vector(iota(12), {3, 4});
  Tensor dst = Tensor::zeros({4, 3});
  dst.copy_from(src.transpose(0, 1));
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  Tensor big = Tensor::zeros({6, 8});
  big.slice(0, 0, 6, 2).slice(1, 1, 8, 2).copy_from(src);  // a strided destination
  EXPECT_EQ(big.get<float>({4, 7}), 11.0f);
  EXPECT_EQ(big.get<float>({1, 1}), 0.0f);
  Tensor col = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3, 1});
  Tensor b = Tensor::zeros({3, 4});
  b.copy_from(col);
  EXPECT_EQ(b.get<float>({2, 3}), 3.0f);
  EXPECT_THROW(b.copy_from(Tensor::zeros({3, 4}, DType::F64)), Error);
  EXPECT_THROW(b.copy_from(Tensor::zeros({4, 4})), Error);
}

TEST(Tensor, CastAllDTypePairs) {
  const std::vector<double> values{0, 1, 2, 3, 100, 7};
  for (DType from : kAllDTypes) {
    Tensor src = Tensor::from_vector(values).to(from);
    for (DType to : kAllDTypes) {
      Tensor dst = src.to(to);
      EXPECT_EQ(dst.dtype(), to);
      for (std::int64_t i = 0; i < 6; ++i) {
        double expect = values[static_cast<std::size_t>(i)];
        if (from == DType::Bool || to == DType::Bool) expect = expect != 0 ? 1 : 0;
        EXPECT_EQ(dst.get_double({i}), expect) << dtype_name(from) << "->" << dtype_name(to);
      }
    }
  }
  EXPECT_EQ(Tensor::full({1}, -2.7, DType::F32).to(DType::I32).get<std::int32_t>({0}), -2);
}

TEST(Tensor, FromAllocationChecksBounds) {
  auto a = Allocation::create(Place::host(), 64);
  EXPECT_NO_THROW(Tensor::from_allocation(a, DType::F32, {4, 4}));
  EXPECT_THROW(Tensor::from_allocation(a, DType::F32, {4, 4}, 1), Error);
  EXPECT_THROW(Tensor::from_allocation(a, DType::F64, {3, 3}), Error);
}

TEST(Tensor, PrintingShowsDTypeShapePlaceAndValues) {
  Tensor t = Tensor::from_vector(iota(6), {2, 3});
  EXPECT_EQ(t.to_string(), "Tensor(f32, [2, 3], host) [[0, 1, 2], [3, 4, 5]]");
  const std::string long_one = Tensor::arange(100, DType::I32).to_string();
  EXPECT_NE(long_one.find("..."), std::string::npos);
  EXPECT_NE(long_one.find("99"), std::string::npos);
  EXPECT_EQ(Tensor().to_string(), "Tensor(undefined)");
}

TEST(Tensor, MismatchErrorsShowBothSides) {
  Tensor t = Tensor::zeros({2, 3});
  try {
    t.check_shape({3, 2}, "linear input");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "linear input: expected shape [3, 2], got [2, 3]");
  }
  try {
    t.check_dtype(DType::I64, "keys");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "keys: expected dtype i64, got f32");
  }
  EXPECT_THROW((void)t.data<double>(), Error);
  EXPECT_THROW((void)t.get<float>({0}), Error);
  EXPECT_THROW((void)t.get<float>({2, 0}), Error);
}

TEST(Tensor, HostPlacesAndViewAs) {
  Tensor keys = Tensor::from_vector(std::vector<std::uint32_t>{1, 2, 0xffffffffu});
  Tensor signed_view = keys.view_as(DType::I32);
  EXPECT_EQ(signed_view.get<std::int32_t>({2}), -1);
  EXPECT_THROW(keys.view_as(DType::I64), Error);  // 12 bytes are not whole i64s
}

// Between sizes, the last dimension is rescaled (PyTorch's Tensor.view(dtype)): 16-bit rows as
// 32-bit words and back, the bytes untouched, a sliced start included.
TEST(Tensor, ViewAsBetweenSizesRescalesTheLastDimension) {
  std::vector<std::uint16_t> bits(3 * 6);
  for (std::size_t i = 0; i < bits.size(); ++i)
    bits[i] = static_cast<std::uint16_t>(0x3c00 + 37 * i);
  const Tensor halves = Tensor::empty({3, 6}, DType::F16);
  std::memcpy(halves.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
  const Tensor words = halves.view_as(DType::U32);
  EXPECT_EQ(words.shape(), (Shape{3, 3}));
  EXPECT_EQ(words.data(), halves.data());
  std::uint32_t expect = 0;
  std::memcpy(&expect, bits.data() + 2 * 6 + 4, sizeof expect);
  EXPECT_EQ(words.get<std::uint32_t>({2, 2}), expect);
  const Tensor back = words.view_as(DType::F16);
  EXPECT_EQ(back.shape(), halves.shape());
  EXPECT_EQ(back.data(), halves.data());
  EXPECT_EQ(std::memcmp(back.data(), bits.data(), bits.size() * sizeof(std::uint16_t)), 0);
  // A view that starts at row 1: its start moves with it.
  const Tensor tail = halves.slice(0, 1, 3).view_as(DType::U32);
  EXPECT_EQ(tail.shape(), (Shape{2, 3}));
  EXPECT_EQ(tail.data(), halves.slice(0, 1, 3).data());
  // An odd 16-bit row, a start inside a word, a scalar, a strided view: refused.
  EXPECT_THROW(Tensor::zeros({4, 7}, DType::F16).view_as(DType::U32), Error);
  EXPECT_THROW(Tensor::zeros({8}, DType::F16).slice(0, 1, 7).view_as(DType::U32), Error);
  EXPECT_THROW(Tensor::zeros({}, DType::F16).view_as(DType::U32), Error);
  EXPECT_THROW(Tensor::zeros({4, 8}, DType::F16).transpose(0, 1).view_as(DType::U32), Error);
  // Wider to narrower: [2] u64 as [4] u32.
  const Tensor wide = Tensor::from_vector(std::vector<std::uint64_t>{1, 2});
  EXPECT_EQ(wide.view_as(DType::U32).shape(), (Shape{4}));
}

}  // namespace
}  // namespace ember
