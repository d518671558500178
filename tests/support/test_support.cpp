#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ember/core/log.hpp"
#include "support/test_support.hpp"

namespace ember::testing {

std::uint64_t run_seed() {
  static const std::uint64_t seed = [] {
    if (const char* env = std::getenv("EMBER_TEST_SEED"); env != nullptr && *env != '\0') {
      return static_cast<std::uint64_t>(std::strtoull(env, nullptr, 10));
    }
    return static_cast<std::uint64_t>(
        std::chrono::high_resolution_clock::now().time_since_epoch().count());
  }();
  return seed;
}

std::mt19937_64 make_rng(std::uint64_t salt) {
  std::uint64_t h = run_seed() ^ (salt * 0x9e3779b97f4a7c15ull);
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    for (const char* p : {info->test_suite_name(), info->name()}) {
      for (; *p != 0; ++p)
        h = (h ^ static_cast<unsigned char>(*p)) * 0x100000001b3ull;
    }
  }
  return std::mt19937_64(h);
}

void run_on_threads(int n, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        body(i);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::filesystem::path source_dir() {
  return std::filesystem::path(EMBER_SOURCE_DIR);
}

std::optional<std::filesystem::path> shared_data_dir() {
  namespace fs = std::filesystem;
  const fs::path source(EMBER_SOURCE_DIR);
  for (const fs::path& candidate :
       {source / ".." / "shared" / "data", source / "shared" / "data"}) {
    std::error_code ec;
    if (fs::is_directory(candidate, ec)) return fs::weakly_canonical(candidate);
  }
  return std::nullopt;
}

ScratchDir::ScratchDir() {
  static std::atomic<int> counter{0};
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  path_ = std::filesystem::temp_directory_path() /
          ("ember-test-" + std::to_string(stamp) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

struct LogCapture::State {
  std::ostringstream out;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink =
      std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::level::level_enum old_level = spdlog::level::info;
};

LogCapture::LogCapture() : state_(std::make_unique<State>()) {
  state_->old_level = logger().level();
  logger().set_level(spdlog::level::info);
  logger().sinks().push_back(state_->sink);
}

LogCapture::~LogCapture() {
  auto& sinks = logger().sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), state_->sink), sinks.end());
  logger().set_level(state_->old_level);
}

std::string LogCapture::text() const {
  state_->sink->flush();
  return state_->out.str();
}

}  // namespace ember::testing
