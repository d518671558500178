#include "ember/train/checkpoint_recovery.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/train/checkpoint.hpp"

namespace ember::train {

namespace fs = std::filesystem;

namespace {

struct Leftover {
  fs::path path;
  std::string base;  // the checkpoint's name
  bool staging = false;
  long pid = 0;
};

// "<base>.tmp-<pid>-<n>" or "<base>.old-<pid>"; nothing for any other name.
std::optional<Leftover> parse_leftover(const fs::path& path) {
  const std::string name = path.filename().string();
  for (const bool staging : {true, false}) {
    const std::string mark = staging ? ".tmp-" : ".old-";
    const auto at = name.rfind(mark);
    if (at == std::string::npos || at == 0) continue;
    const std::string rest = name.substr(at + mark.size());
    long pid = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (ec != std::errc() || pid <= 0) continue;
    const bool well_formed = staging ? (end != rest.data() + rest.size() && *end == '-')
                                     : end == rest.data() + rest.size();
    if (!well_formed) continue;
    return Leftover{path, name.substr(0, at), staging, pid};
  }
  return std::nullopt;
}

// A process that may still be writing its leftovers (this one included).
bool process_alive(long pid) {
  if (pid == static_cast<long>(::getpid())) return true;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::vector<Leftover> leftovers_of(const fs::path& dir) {
  std::vector<Leftover> found;
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) return found;
  const std::string base = dir.filename().string();
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    auto l = parse_leftover(entry.path());
    if (l && l->base == base && !process_alive(l->pid)) found.push_back(*l);
  }
  return found;
}

// The iteration of a complete checkpoint, nothing when it does not verify.
std::optional<std::int64_t> complete_iteration(const fs::path& dir) {
  try {
    const nlohmann::json meta = verify_checkpoint(dir);
    const auto it = meta.find("iteration");
    return it != meta.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

bool recover_checkpoint(const fs::path& dir) {
  std::vector<Leftover> leftovers = leftovers_of(dir);
  if (leftovers.empty()) return false;
  bool restored = false;
  if (!fs::exists(dir)) {
    // A finished staging directory is the newer model; the moved-aside one the older.
    const Leftover* best = nullptr;
    std::int64_t best_iteration = -1;
    for (const Leftover& l : leftovers) {
      const auto iteration = complete_iteration(l.path);
      if (!iteration) continue;
      const bool better = best == nullptr || (l.staging && !best->staging) ||
                          (l.staging == best->staging && *iteration > best_iteration);
      if (better) {
        best = &l;
        best_iteration = *iteration;
      }
    }
    if (best != nullptr) {
      fs::rename(best->path, dir);
      EMBER_LOG_WARN("{}: restored from {} ({} of an interrupted save, iteration {})", dir.string(),
                     best->path.filename().string(),
                     best->staging ? "the completed new checkpoint" : "the replaced checkpoint",
                     best_iteration);
      restored = true;
    }
  }
  for (const Leftover& l : leftovers) {
    std::error_code ec;
    if (!fs::exists(l.path, ec)) continue;
    if (fs::is_directory(dir, ec) && fs::is_directory(l.path, ec))
      move_carried_entries(l.path, dir);
    fs::remove_all(l.path, ec);
    EMBER_LOG_INFO("{}: removed {}, left by an interrupted save", dir.string(),
                   l.path.filename().string());
  }
  return restored;
}

void recover_checkpoints_in(const fs::path& parent) {
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) return;
  std::set<std::string> bases;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    if (auto l = parse_leftover(entry.path()); l && !process_alive(l->pid)) bases.insert(l->base);
  }
  for (const std::string& base : bases)
    recover_checkpoint(parent / base);
}

}  // namespace ember::train
