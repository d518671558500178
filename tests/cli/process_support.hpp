// A child process the test controls: its id (for signals), its standard output read line by
// line as it comes, its standard error in a file. For the tests that interrupt or kill `ember`
// while it runs (Ctrl-C, the soak test); the plain runs use ember() from cli_run_support.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ember::testing {

class ChildProcess {
 public:
  // Runs argv[0] (a path) with `argv`; stdout to the test, stderr to `err_file`.
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& err_file);
  ~ChildProcess();  // a child still running is killed (SIGKILL) and reaped
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads output until a line satisfies `match` (returned), the output ends, or `timeout`.
  std::optional<std::string> wait_for_line(const std::function<bool(const std::string&)>& match,
                                           std::chrono::milliseconds timeout);
  // Reads what is there to read within `timeout`.
  void read_for(std::chrono::milliseconds timeout);
  const std::vector<std::string>& lines() const { return lines_; }
  void send(int signal) const;
  // Reads the rest of the output and waits for the end; the wait status (see waitpid).
  int wait();

 private:
  // One read of whatever is available within `timeout`; false at the end of the output.
  bool read_some(std::chrono::milliseconds timeout);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string partial_;
  std::vector<std::string> lines_;
  std::optional<int> status_;
};

// argv for the `ember` binary under test.
std::vector<std::string> ember_argv(std::vector<std::string> args);

}  // namespace ember::testing
