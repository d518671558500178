#include "cli/process_support.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace ember::testing {

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::filesystem::path& err_file) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string err = err_file.string();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e >= 0) ::dup2(e, STDERR_FILENO);
    ::signal(SIGINT, SIG_DFL);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  out_fd_ = fds[0];
}

ChildProcess::~ChildProcess() {
  if (!status_) {
    ::kill(pid_, SIGKILL);
    int s = 0;
    ::waitpid(pid_, &s, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

bool ChildProcess::read_some(std::chrono::milliseconds timeout) {
  if (out_fd_ < 0) return false;
  pollfd p{out_fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) return ready == 0 || errno == EINTR;
  char buf[4096];
  const ssize_t n = ::read(out_fd_, buf, sizeof buf);
  if (n <= 0) {
    ::close(out_fd_);
    out_fd_ = -1;
    if (!partial_.empty()) lines_.push_back(std::move(partial_));
    partial_.clear();
    return false;
  }
  partial_.append(buf, static_cast<std::size_t>(n));
  for (std::size_t nl; (nl = partial_.find('\n')) != std::string::npos;) {
    lines_.push_back(partial_.substr(0, nl));
    partial_.erase(0, nl + 1);
  }
  return true;
}

std::optional<std::string> ChildProcess::wait_for_line(
    const std::function<bool(const std::string&)>& match, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t seen = 0;
  for (;;) {
    for (; seen < lines_.size(); ++seen) {
      if (match(lines_[seen])) return lines_[seen];
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (out_fd_ < 0 || left.count() <= 0) return std::nullopt;
    read_some(std::min(left, std::chrono::milliseconds(100)));
  }
}

void ChildProcess::read_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline && out_fd_ >= 0) {
    read_some(std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()));
  }
}

void ChildProcess::send(int signal) const {
  ::kill(pid_, signal);
}

int ChildProcess::wait() {
  while (read_some(std::chrono::milliseconds(1000))) {
  }
  if (!status_) {
    int s = 0;
    ::waitpid(pid_, &s, 0);
    status_ = s;
  }
  return *status_;
}

std::vector<std::string> ember_argv(std::vector<std::string> args) {
  args.insert(args.begin(), EMBER_EXE_PATH);
  return args;
}

}  // namespace ember::testing
