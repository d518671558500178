#include "data/fuzz_support.hpp"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"

namespace ember::data::fuzztest {

double fuzz_seconds(double default_seconds) {
  if (const char* env = std::getenv("EMBER_TEST_FUZZ_SECONDS"); env != nullptr && *env != '\0') {
    const double v = std::strtod(env, nullptr);
    if (v > 0) return v;
  }
  return default_seconds;
}

std::vector<char> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> damage(const std::vector<char>& good, std::mt19937_64& rng, std::size_t hot_bytes,
                         HotEnd hot, std::string* what) {
  std::vector<char> b = good;
  const std::size_t size = b.size();
  if (size == 0) return b;
  auto flip = [&](std::size_t at) {
    b[at] = static_cast<char>(b[at] ^ static_cast<char>(1 + rng() % 255));
    *what += ' ';  // two appends: GCC 12 warns (-Wrestrict, falsely) about " " + string
    *what += std::to_string(at);
  };
  switch (rng() % 4) {
    case 0: {
      const std::size_t keep = rng() % size;
      b.resize(keep);
      *what = "truncated to " + std::to_string(keep) + " of " + std::to_string(size) + " bytes";
      break;
    }
    case 1:
      *what = "bytes flipped at";
      for (int k = 1 + static_cast<int>(rng() % 8); k > 0; --k)
        flip(rng() % size);
      break;
    case 2: {
      const std::size_t region = std::min(size, std::max<std::size_t>(hot_bytes, 1));
      *what = hot == HotEnd::Head ? "header bytes flipped at" : "footer bytes flipped at";
      for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k)
        flip(hot == HotEnd::Head ? rng() % region : size - 1 - rng() % region);
      break;
    }
    default: {
      const std::size_t at = rng() % size;
      const std::size_t n = std::min<std::size_t>(size - at, 1 + rng() % 64);
      for (std::size_t k = 0; k < n; ++k)
        b[at + k] = static_cast<char>(rng());
      *what = std::to_string(n) + " random bytes at " + std::to_string(at);
    }
  }
  return b;
}

namespace {

// Aborts the process when an attempt outlives its time: a hang must fail the test, and the
// stuck thread cannot be stopped any other way.
class HangWatch {
 public:
  explicit HangWatch(double seconds)
      : limit_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(seconds))),
        thread_([this] { watch(); }) {}
  ~HangWatch() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  void arm(const std::string* what) {
    std::lock_guard lock(mutex_);
    what_ = what;
    deadline_ = std::chrono::steady_clock::now() + limit_;
    armed_ = true;
    changed_.notify_all();
  }
  void disarm() {
    std::lock_guard lock(mutex_);
    armed_ = false;
    changed_.notify_all();
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (!armed_) {
        changed_.wait(lock);
        continue;
      }
      if (changed_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !stop_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(stderr, "fuzz: an attempt did not finish within %.0f s (a hang): %s\n",
                     std::chrono::duration<double>(limit_).count(),
                     what_ != nullptr ? what_->c_str() : "?");
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  std::chrono::steady_clock::duration limit_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false, armed_ = false;
  const std::string* what_ = nullptr;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

}  // namespace

FuzzTally run_fuzz(double seconds, double hang_seconds,
                   const std::function<void(std::mt19937_64&, std::string&)>& attempt,
                   std::mt19937_64& rng) {
  FuzzTally tally;
  // Damaged files warn a lot (drops, trailing bytes); the test is about errors and crashes.
  const auto old_level = logger().level();
  logger().set_level(spdlog::level::err);
  struct Restore {
    spdlog::level::level_enum level;
    ~Restore() { logger().set_level(level); }
  } restore{old_level};
  HangWatch watch(hang_seconds);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(seconds));
  std::string what;
  while (std::chrono::steady_clock::now() < deadline) {
    what = "(before any damage)";
    ++tally.runs;
    watch.arm(&what);
    try {
      attempt(rng, what);
    } catch (const Error&) {
      ++tally.rejected;
    } catch (const std::exception& e) {
      watch.disarm();
      ADD_FAILURE() << "a damaged file (" << what << ") threw a non-Ember error: " << e.what();
      return tally;
    }
    watch.disarm();
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "after: " << what;
      return tally;
    }
  }
  std::printf("fuzz: %d damaged files in %.1f s, %d rejected with an error, %d read\n", tally.runs,
              seconds, tally.rejected, tally.runs - tally.rejected);
  return tally;
}

}  // namespace ember::data::fuzztest
