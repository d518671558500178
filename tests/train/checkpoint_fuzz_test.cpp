// The checkpoint loader against damaged files: random truncations, byte flips and appended bytes
// in every file of a real checkpoint, meta.json included. Each damaged copy is loaded (and, when
// that succeeds, evaluated on one batch): the outcome must be a valid load or an Ember error with
// a message, never a crash, a hang or a foreign exception (a JSON library's, a filesystem's).
//
// Half of the damaged copies get their sizes and hashes rewritten in meta.json, so that the
// damage reaches the loaders behind the hash check (keys, vectors, states, step counts).
//
// Bounded in time: EMBER_TEST_FUZZ_SECONDS (default 3) seconds of mutations; set it higher for
// a longer run, e.g. EMBER_TEST_FUZZ_SECONDS=600 ctest -R CheckpointFuzz. The seed is
// EMBER_TEST_SEED (printed at start) and each failure names its mutation.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/train/session.hpp"
#include "train/training_support.hpp"

namespace ember::train {
namespace {

namespace fs = std::filesystem;
using namespace testing_support;

double fuzz_seconds() {
  const char* env = std::getenv("EMBER_TEST_FUZZ_SECONDS");
  return env != nullptr && *env != '\0' ? std::atof(env) : 3.0;
}

std::vector<fs::path> files_of(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(fs::relative(e.path(), dir));
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Damages `path` in one of three ways and says how.
std::string damage(const fs::path& path, std::mt19937_64& rng) {
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ostringstream what;
  const int kind = static_cast<int>(rng() % 3);
  if (kind == 0 || bytes.empty()) {
    const std::size_t keep = bytes.empty() ? 0 : rng() % bytes.size();
    what << "truncated to " << keep << " of " << bytes.size() << " bytes";
    bytes.resize(keep);
  } else if (kind == 1) {
    const int flips = 1 + static_cast<int>(rng() % 8);
    what << flips << " byte(s) changed at";
    for (int i = 0; i < flips; ++i) {
      const std::size_t at = rng() % bytes.size();
      bytes[at] = static_cast<char>(rng());
      what << " " << at;
    }
  } else {
    const std::size_t extra = 1 + rng() % 64;
    what << extra << " bytes appended";
    for (std::size_t i = 0; i < extra; ++i)
      bytes.push_back(static_cast<char>(rng()));
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return what.str();
}

TEST(CheckpointFuzz, DamagedCheckpointsLoadOrFailWithAnEmberError) {
  const auto json = sample_config("dlrm");
  auto data = make_dataset(json, 2000);
  const ModelConfig config = tiny_config(json, *data, 256, 2, {"solver.max_eval_batches=1"});
  ember::testing::ScratchDir dir;
  {
    Session s(config, quiet_options());
    (void)s.train();
    s.save(dir / "pristine");
  }
  const std::vector<fs::path> files = files_of(dir / "pristine");
  ASSERT_GE(files.size(), 8u);
  auto rng = ember::testing::make_rng();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(fuzz_seconds());
  int rounds = 0, loaded = 0;
  while (rounds < 8 || std::chrono::steady_clock::now() < deadline) {
    const fs::path work = dir / "work";
    fs::remove_all(work);
    fs::copy(dir / "pristine", work, fs::copy_options::recursive);
    const fs::path& file = files[rng() % files.size()];
    const bool rehash = file != "meta.json" && rng() % 2 == 0;
    const std::string what =
        file.string() + " " + damage(work / file, rng) + (rehash ? ", meta.json rehashed" : "");
    if (rehash) rehash_checkpoint(work);
    try {
      Session s(config, quiet_options());
      s.load(work);
      (void)s.evaluate();
      ++loaded;
    } catch (const Error& e) {
      EXPECT_FALSE(std::string(e.what()).empty()) << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": not an Ember error: " << e.what();
    }
    ++rounds;
  }
  std::printf("checkpoint fuzz: %d damaged copies, %d loaded\n", rounds, loaded);
}

}  // namespace
}  // namespace ember::train
