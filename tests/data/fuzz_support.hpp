// The fuzz tests' harness (any reader): damaged copies of good files, made at random for a
// bounded time; every attempt must end in a valid read or an ember::Error, never a crash, another
// exception or a hang.
//
// Time: EMBER_TEST_FUZZ_SECONDS (seconds per fuzz test, e.g. 600 for a long run; the checkpoint
// fuzz of tests/train reads the same variable), else the test's
// default (a few seconds, CI's bound). The run seed (EMBER_TEST_SEED, printed at start-up)
// reproduces a run's damage.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ember::data::fuzztest {

// Seconds a fuzz test runs: EMBER_TEST_FUZZ_SECONDS when set (positive), else `default_seconds`.
double fuzz_seconds(double default_seconds);

std::vector<char> read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::vector<char>& bytes);

// Where a format keeps what says how to read the rest: the first bytes (a Norm header) or the
// last (a Parquet footer).
enum class HotEnd { Head, Tail };

// A damaged copy of `good`: truncated anywhere, a few bytes flipped anywhere, a few flipped in
// the `hot_bytes` at the `hot` end, or a run of random bytes. `what` receives a description for
// failure messages.
std::vector<char> damage(const std::vector<char>& good, std::mt19937_64& rng, std::size_t hot_bytes,
                         HotEnd hot, std::string* what);

struct FuzzTally {
  int runs = 0;
  int rejected = 0;  // ended in an ember::Error
};

// Runs attempt(rng, what) until the time is up; `what` (set by the attempt, before the risky
// part) names the damage. An ember::Error counts as rejected; another exception fails the test;
// an attempt still running after `hang_seconds` is a hang: the harness prints the damage and
// aborts (a thread cannot be stopped), which CTest reports as a failure.
FuzzTally run_fuzz(double seconds, double hang_seconds,
                   const std::function<void(std::mt19937_64&, std::string&)>& attempt,
                   std::mt19937_64& rng);

}  // namespace ember::data::fuzztest
