#include "ember/core/error.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(Error, CheckCarriesTheMessageAndLocation) {
  const int n = -3;
  try {
    EMBER_CHECK(n > 0, "batch size must be positive, got ", n);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "batch size must be positive, got -3");
    EXPECT_NE(e.where().find("error_test.cpp"), std::string::npos) << e.where();
  }
}

TEST(Error, CheckWithoutMessageNamesTheCondition) {
  try {
    EMBER_CHECK(1 + 1 == 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 + 1 == 3"), std::string::npos) << e.what();
  }
}

TEST(Error, TypedThrows) {
  EXPECT_THROW(EMBER_THROW_AS(ConfigError, "bad key ", "x"), ConfigError);
  EXPECT_THROW(EMBER_THROW_AS(DataError, "bad file"), Error);
  EXPECT_THROW(EMBER_THROW_AS(OutOfMemoryError, "oom"), Error);
}

TEST(Error, LibraryStatusesAreNamed) {
  try {
    detail::throw_cublas_error("cublasSgemm(...)", 7, __FILE__, __LINE__);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("cublasSgemm"), std::string::npos);
  }
  try {
    detail::throw_nccl_error("ncclAllReduce(...)", 4, __FILE__, __LINE__);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ncclInvalidArgument"), std::string::npos);
  }
}

}  // namespace
}  // namespace ember
