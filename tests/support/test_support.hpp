// Helpers every test suite shares: GPU skipping, fresh-but-reproducible random seeds, the
// shared sample data, scratch directories.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "ember/core/device.hpp"

namespace ember::testing {

// The seed of this test run: fresh each run (so inputs differ between runs) unless
// EMBER_TEST_SEED is set; printed at start-up so a failure can be reproduced.
std::uint64_t run_seed();

// A generator seeded from the run seed and the current test's name, so each test gets its own
// stream and a test's inputs do not depend on which other tests ran.
std::mt19937_64 make_rng(std::uint64_t salt = 0);

// The repository's root (for configs/ and other checked-in files).
std::filesystem::path source_dir();

// ../shared/data next to the checkout, or nothing (a user's fresh clone has no ../shared).
std::optional<std::filesystem::path> shared_data_dir();

// Runs body(i) for i < n at once, each on its own thread (the ranks of an in-process group),
// joins them all, then rethrows the first thread's error.
void run_on_threads(int n, const std::function<void(int)>& body);

// A new empty directory under the system temp dir, removed when the object goes.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Captures what the Ember logger writes (info and above) while it lives.
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ember::testing

// Skips the current test (reported as skipped, not passed) when no CUDA device is usable.
#define EMBER_REQUIRE_GPU()                                                        \
  do {                                                                             \
    if (!::ember::cuda_available()) {                                              \
      GTEST_SKIP() << (::ember::cuda_compiled() ? "no CUDA device on this machine" \
                                                : "this build has no CUDA");       \
    }                                                                              \
  } while (0)

// Skips the current test unless ../shared/data is present; binds `dir` to it.
#define EMBER_REQUIRE_SHARED_DATA(dir)                                                         \
  const auto dir##_opt = ::ember::testing::shared_data_dir();                                  \
  if (!dir##_opt) GTEST_SKIP() << "../shared/data is absent (a fresh clone has no ../shared)"; \
  const std::filesystem::path dir = *dir##_opt

// Expects `statement` to throw `type` whose message contains `text` (a failure shows the message).
#define EMBER_EXPECT_THROW_WITH(statement, type, text)                          \
  do {                                                                          \
    try {                                                                       \
      statement;                                                                \
      ADD_FAILURE() << #statement " did not throw " #type;                      \
    } catch (const type& e_) {                                                  \
      EXPECT_NE(std::string(e_.what()).find(text), std::string::npos)           \
          << "message: " << e_.what() << "\n  expected to contain: " << (text); \
    } catch (const std::exception& e_) {                                        \
      ADD_FAILURE() << #statement " threw another type: " << e_.what();         \
    }                                                                           \
  } while (0)
