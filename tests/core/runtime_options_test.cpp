// RuntimeOptions: every EMBER_* variable read from one lookup, defaults when unset, and a bad
// value reported by its accessor with the variable, the value and what is accepted.
#include "ember/core/runtime_options.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ember/core/error.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

RuntimeOptions parse(const std::map<std::string, std::string>& env) {
  return RuntimeOptions::parse([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(RuntimeOptions, DefaultsWhenNothingIsSet) {
  const RuntimeOptions o = parse({});
  EXPECT_EQ(o.allocator(), kDefaultAllocatorMode);
  EXPECT_EQ(o.copy_threads(), 0);
  EXPECT_EQ(o.log_level(), "");
  EXPECT_EQ(o.key_exchange(), KeyExchangeMode::Auto);
  ASSERT_FALSE(o.settings().empty());
  for (const auto& s : o.settings()) {
    EXPECT_FALSE(s.set) << s.variable;
    EXPECT_FALSE(s.meaning.empty()) << s.variable;
    EXPECT_FALSE(s.default_value.empty()) << s.variable;
    if (s.variable == "EMBER_ALLOCATOR") {
      EXPECT_EQ(s.default_value, to_string(kDefaultAllocatorMode));
    }
  }
}

TEST(RuntimeOptions, ReadsEveryVariable) {
  const RuntimeOptions o = parse({{"EMBER_ALLOCATOR", "expandable"},
                                  {"EMBER_COPY_THREADS", "5"},
                                  {"EMBER_LOG_LEVEL", "warn"},
                                  {"EMBER_KEY_EXCHANGE", "host"},
                                  {"UNRELATED", "x"}});
  EXPECT_EQ(o.allocator(), AllocatorMode::Expandable);
  EXPECT_EQ(o.copy_threads(), 5);
  EXPECT_EQ(o.log_level(), "warn");
  EXPECT_EQ(parse({{"EMBER_ALLOCATOR", "raw"}}).allocator(), AllocatorMode::Raw);
  EXPECT_EQ(parse({{"EMBER_ALLOCATOR", "caching"}}).allocator(), AllocatorMode::Caching);
  EXPECT_EQ(o.key_exchange(), KeyExchangeMode::Host);
  EXPECT_EQ(parse({{"EMBER_KEY_EXCHANGE", "mpi"}}).key_exchange(), KeyExchangeMode::Mpi);
  EXPECT_EQ(parse({{"EMBER_KEY_EXCHANGE", "auto"}}).key_exchange(), KeyExchangeMode::Auto);
  int set = 0;
  for (const auto& s : o.settings())
    set += s.set ? 1 : 0;
  EXPECT_EQ(set, 4);
}

TEST(RuntimeOptions, ABadValueFailsItsOwnAccessorOnly) {
  const RuntimeOptions o = parse({{"EMBER_ALLOCATOR", "fast"}, {"EMBER_COPY_THREADS", "0"}});
  EMBER_EXPECT_THROW_WITH(o.allocator(), ConfigError, "EMBER_ALLOCATOR='fast'");
  EMBER_EXPECT_THROW_WITH(o.allocator(), ConfigError, "caching");
  EMBER_EXPECT_THROW_WITH(o.copy_threads(), ConfigError, "EMBER_COPY_THREADS='0'");
  EXPECT_EQ(o.log_level(), "");
  EMBER_EXPECT_THROW_WITH(parse({{"EMBER_COPY_THREADS", "4x"}}).copy_threads(), ConfigError, "4x");
  EMBER_EXPECT_THROW_WITH(parse({{"EMBER_LOG_LEVEL", "loud"}}).log_level(), ConfigError, "loud");
  EMBER_EXPECT_THROW_WITH(parse({{"EMBER_KEY_EXCHANGE", "shared"}}).key_exchange(), ConfigError,
                          "EMBER_KEY_EXCHANGE='shared'");
}

// What mpirun (OpenMPI), Hydra (MPICH) and MVAPICH tell the processes they start.
TEST(RuntimeOptions, SeesAnMpiLauncher) {
  EXPECT_EQ(parse({}).launcher_world_size(), 0);
  EXPECT_EQ(parse({}).launcher_world_rank(), -1);
  const RuntimeOptions ompi = parse({{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "2"}});
  EXPECT_EQ(ompi.launcher_world_size(), 3);
  EXPECT_EQ(ompi.launcher_world_rank(), 2);
  const RuntimeOptions hydra = parse({{"PMI_SIZE", "1"}, {"PMI_RANK", "0"}});
  EXPECT_EQ(hydra.launcher_world_size(), 1);
  EXPECT_EQ(hydra.launcher_world_rank(), 0);
  EXPECT_EQ(parse({{"MV2_COMM_WORLD_SIZE", "4"}}).launcher_world_size(), 4);
  // Not a number, or zero: no launcher.
  EXPECT_EQ(parse({{"OMPI_COMM_WORLD_SIZE", "two"}}).launcher_world_size(), 0);
  EXPECT_EQ(parse({{"PMI_SIZE", "0"}}).launcher_world_size(), 0);
}

}  // namespace
}  // namespace ember
