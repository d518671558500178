#include "cli/mpi_run_support.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

namespace ember {

std::string mpirun(int processes) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
         "OMPI_MCA_rmaps_base_oversubscribe=1 '" +
         std::string(kMpiexec != nullptr ? kMpiexec : "mpiexec") + "' -np " +
         std::to_string(processes) + " --oversubscribe --allow-run-as-root";
}

Outcome run_in(int processes, const std::string& args, const testing::ScratchDir& dir) {
  const std::string launcher = processes > 0 ? mpirun(processes) + " \"$EMBER\"" : "\"$EMBER\"";
  return shell("cd '" + dir.path().string() + "' && " + launcher + args, dir);
}

std::string config_path(const std::string& name) {
  return (testing::source_dir() / "configs" / (name + ".json")).string();
}

std::string train_args(const std::string& config, const std::string& data,
                       const std::string& device) {
  return " train '" + config + "' --device " + device +
         " --no-progress --set layers.data.source='" + data +
         "/train.txt' --set layers.data.eval_source='" + data +
         "/eval.txt' --set solver.batchsize=240 --set solver.batchsize_eval=240"
         " --set solver.display=5 --set solver.eval_interval=10 --set solver.max_iter=20";
}

std::vector<std::string> numbers_of(const std::string& out) {
  std::vector<std::string> lines;
  const std::regex timing(" (samples/s|seconds)=[0-9.e+-]+");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    lines.push_back(std::regex_replace(line, timing, ""));
  return lines;
}

double value_of_key(const std::string& text, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(key + "=([-0-9.e+na]+)"))) return -1;
  return std::stod(m[1]);
}

}  // namespace ember
