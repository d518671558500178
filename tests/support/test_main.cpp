#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "ember/core/log.hpp"
#include "ember/core/openmp_policy.hpp"
#include "support/test_support.hpp"

int main(int argc, char** argv) {
  ember::prefer_passive_openmp(argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (std::getenv("EMBER_LOG_LEVEL") == nullptr) ember::set_log_level("warn");
  std::printf("EMBER_TEST_SEED=%llu\n",
              static_cast<unsigned long long>(ember::testing::run_seed()));
  return RUN_ALL_TESTS();
}
