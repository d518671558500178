// Running the built `ember` binary from tests, as a user would.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace ember {

struct Outcome {
  int status = -1;
  std::string out, err;
  std::vector<std::string> lines() const;
};

std::string slurp(const std::filesystem::path& p);

// Runs `ember <args>` (a shell command line: quote paths), capturing stdout and stderr; `env`
// ("NAME=value ...") is added to its environment.
Outcome ember(const std::string& args, const testing::ScratchDir& dir, const std::string& env = "");

// Runs a shell command line in which "$EMBER" is the `ember` binary under test (for a working
// directory of its own, resource limits, pipes), capturing stdout and stderr.
Outcome shell(const std::string& script, const testing::ScratchDir& dir);

}  // namespace ember
