#include "cli/cli_run_support.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

namespace ember {

std::vector<std::string> Outcome::lines() const {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    v.push_back(l);
  return v;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

namespace {

Outcome run(const std::string& cmd, const std::filesystem::path& err_file) {
  Outcome r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << cmd;
    return r;
  }
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0)
    r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(err_file);
  return r;
}

}  // namespace

Outcome ember(const std::string& args, const testing::ScratchDir& dir, const std::string& env) {
  const auto err_file = dir / "stderr.txt";
  return run((env.empty() ? "" : "env " + env + " ") + std::string(EMBER_EXE_PATH) + " " + args +
                 " 2> '" + err_file.string() + "'",
             err_file);
}

Outcome shell(const std::string& script, const testing::ScratchDir& dir) {
  const auto err_file = dir / "stderr.txt";
  const auto script_file = dir / "script.sh";
  std::ofstream(script_file) << script << "\n";
  return run("EMBER='" + std::string(EMBER_EXE_PATH) + "' /bin/sh '" + script_file.string() +
                 "' 2> '" + err_file.string() + "'",
             err_file);
}

}  // namespace ember
