#include "ember/train/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"

namespace ember::train {

namespace fs = std::filesystem;

std::uint64_t hash_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) EMBER_THROW_AS(DataError, "cannot read ", path.string());
  // Word-at-a-time multiply-xor mixing; the length goes in last so that trailing zero bytes
  // still change the hash.
  std::uint64_t h = 0x9e3779b97f4a7c15ull, length = 0;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::size_t got = static_cast<std::size_t>(in.gcount());
    length += got;
    std::size_t i = 0;
    for (; i + 8 <= got; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, buffer.data() + i, 8);
      h = (h ^ (w * 0xff51afd7ed558ccdull)) * 0xc4ceb9fe1a85ec53ull;
      h ^= h >> 29;
    }
    for (; i < got; ++i)
      h = (h ^ static_cast<unsigned char>(buffer[i])) * 0x100000001b3ull;
  }
  h ^= length * 0x9e3779b97f4a7c15ull;
  h ^= h >> 31;
  return h;
}

void write_raw(std::ofstream& out, const Tensor& t, const fs::path& path) {
  if (t.numel() == 0) return;
  const Tensor host = t.to(Place::host());
  out.write(static_cast<const char*>(host.data()), static_cast<std::streamsize>(host.nbytes()));
  if (!out) EMBER_THROW_AS(DataError, "cannot write ", path.string(), " (disk full?)");
}

void read_raw(std::ifstream& in, const Tensor& t, const fs::path& path) {
  if (t.numel() == 0) return;
  Tensor host = Tensor::empty(t.shape(), t.dtype(), Place::host());
  in.read(static_cast<char*>(host.data()), static_cast<std::streamsize>(host.nbytes()));
  if (static_cast<std::size_t>(in.gcount()) != host.nbytes()) {
    EMBER_THROW_AS(DataError, path.string(), " is too short: needed ", host.nbytes(),
                   " more bytes, got ", in.gcount());
  }
  t.copy_from(host);
}

CheckpointWriter::CheckpointWriter(fs::path final_dir) : final_(std::move(final_dir)) {
  check_replaceable(final_, "checkpoint");
  if (final_.has_parent_path()) fs::create_directories(final_.parent_path());
  std::random_device rd;
  staging_ = final_;
  staging_ += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  fs::remove_all(staging_);
  fs::create_directories(staging_);
}

CheckpointWriter::~CheckpointWriter() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

nlohmann::json to_json(const std::vector<CheckpointFile>& files) {
  nlohmann::json out = nlohmann::json::array();
  for (const CheckpointFile& f : files)
    out.push_back({{"path", f.path}, {"bytes", f.bytes}, {"hash", f.hash}});
  return out;
}

std::vector<CheckpointFile> checkpoint_files_from_json(const nlohmann::json& files) {
  std::vector<CheckpointFile> out;
  for (const auto& f : files) {
    out.push_back({f.at("path").get<std::string>(), f.at("bytes").get<std::uint64_t>(),
                   f.at("hash").get<std::uint64_t>()});
  }
  return out;
}

std::vector<CheckpointFile> hash_files_under(const fs::path& root, const fs::path& sub) {
  std::vector<CheckpointFile> files;
  for (const auto& entry : fs::recursive_directory_iterator(root / sub)) {
    if (!entry.is_regular_file()) continue;
    files.push_back({fs::relative(entry.path(), root).generic_string(),
                     static_cast<std::uint64_t>(entry.file_size()), hash_file(entry.path())});
  }
  return files;
}

void CheckpointWriter::commit(nlohmann::json meta, const std::vector<CheckpointFile>& hashed) {
  // Files hashed by the ranks that wrote them are taken as they are (another process's files
  // may not even be listed yet by this one's view of a shared file system); the rest are hashed
  // here. Listed in path order, so that meta.json does not depend on who wrote what.
  std::map<std::string, CheckpointFile> listed;
  for (const CheckpointFile& f : hashed)
    listed[f.path] = f;
  for (const auto& entry : fs::recursive_directory_iterator(staging_)) {
    if (!entry.is_regular_file()) continue;
    const std::string rel = fs::relative(entry.path(), staging_).generic_string();
    if (listed.count(rel) != 0) continue;
    listed[rel] = {rel, static_cast<std::uint64_t>(entry.file_size()), hash_file(entry.path())};
  }
  std::vector<CheckpointFile> files;
  for (auto& [path, f] : listed)
    files.push_back(std::move(f));
  meta["format"] = "ember-checkpoint";
  meta["version"] = kCheckpointVersion;
  meta["files"] = to_json(files);
  {
    const fs::path meta_path = staging_ / "meta.json";
    std::ofstream out(meta_path);
    out << meta.dump(2) << "\n";
    out.flush();
    if (!out) EMBER_THROW_AS(DataError, "cannot write ", meta_path.string(), " (disk full?)");
  }
  ::sync();  // the renames below must not reach the disk before the files do
  // The older directory of the same name steps aside for the instant of the swap; a crash
  // between the two renames leaves both <final>.old-<pid> and the complete staging directory,
  // which recover_checkpoint() puts back. What the older one held besides its checkpoint
  // (metrics.csv, snapshots) then moves into the new one.
  check_replaceable(final_, "checkpoint");
  fs::path old;
  if (fs::exists(final_)) {
    old = final_;
    old += ".old-" + std::to_string(::getpid());
    fs::remove_all(old);
    fs::rename(final_, old);
  }
  try {
    fs::rename(staging_, final_);
  } catch (...) {
    std::error_code ec;
    if (!old.empty()) fs::rename(old, final_, ec);
    throw;
  }
  committed_ = true;
  if (!old.empty()) {
    move_carried_entries(old, final_);
    fs::remove_all(old);
  }
}

namespace {

[[noreturn]] void damaged_meta(const fs::path& dir, const std::string& what) {
  EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), ": meta.json is damaged (", what, ")");
}

// A listed file's path: relative, inside the checkpoint.
fs::path listed_path(const fs::path& dir, const nlohmann::json& entry) {
  const std::string rel = entry.at("path").get<std::string>();
  const fs::path p(rel);
  if (rel.empty() || p.is_absolute() ||
      std::any_of(p.begin(), p.end(), [](const fs::path& part) { return part == ".."; })) {
    damaged_meta(dir, cat("a listed file's path is '", rel, "'"));
  }
  return dir / p;
}

void verify_files(const fs::path& dir, const nlohmann::json& meta, int part, int parts) {
  const auto& listed = meta.at("files");
  for (std::size_t i = static_cast<std::size_t>(part); i < listed.size();
       i += static_cast<std::size_t>(parts)) {
    const auto& f = listed[i];
    const fs::path path = listed_path(dir, f);
    const std::string name = f.at("path").get<std::string>();
    const auto bytes = f.at("bytes").get<std::uint64_t>();
    const auto hash = f.at("hash").get<std::uint64_t>();
    if (!fs::is_regular_file(path)) {
      EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), ": file ", name, " is missing");
    }
    const auto actual = static_cast<std::uint64_t>(fs::file_size(path));
    if (actual != bytes) {
      EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), ": ", name, " has ", actual,
                     " bytes, expected ", bytes, " (truncated or replaced)");
    }
    if (hash_file(path) != hash) {
      EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), ": ", name,
                     " does not match its recorded hash (the file is damaged)");
    }
  }
}

}  // namespace

nlohmann::json verify_checkpoint(const fs::path& dir, int part, int parts) {
  if (!fs::exists(dir)) EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), " does not exist");
  if (!fs::is_directory(dir)) {
    EMBER_THROW_AS(DataError, "checkpoint ", dir.string(),
                   " is a file, not a checkpoint directory (a checkpoint is the directory that "
                   "holds meta.json)");
  }
  const fs::path meta_path = dir / "meta.json";
  std::ifstream in(meta_path);
  if (!in) {
    EMBER_THROW_AS(DataError, "checkpoint ", dir.string(),
                   " has no meta.json: it is incomplete or not an Ember checkpoint");
  }
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    damaged_meta(dir, e.what());
  }
  if (!meta.is_object() || meta.value("format", "") != "ember-checkpoint" ||
      !meta.contains("files") || !meta["files"].is_array()) {
    EMBER_THROW_AS(DataError, "checkpoint ", dir.string(),
                   ": meta.json is not an Ember checkpoint's");
  }
  try {
    if (meta.value("version", 0) != kCheckpointVersion) {
      EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), " has version ",
                     meta.value("version", 0), "; this Ember reads version ", kCheckpointVersion);
    }
    verify_files(dir, meta, part, std::max(parts, 1));
  } catch (const nlohmann::json::exception& e) {
    damaged_meta(dir, e.what());
  }
  return meta;
}

bool is_checkpoint(const fs::path& dir) {
  std::ifstream in(dir / "meta.json");
  if (!in) return false;
  try {
    const nlohmann::json meta = nlohmann::json::parse(in);
    return meta.is_object() && meta.value("format", "") == "ember-checkpoint";
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

bool is_checkpoint_entry(const std::string& name) {
  static const char* const kEntries[] = {
      "meta.json", "config.json", "dense.model", "dense.non_trainable", "dense_opt_states.model",
      "sparse"};
  return std::any_of(std::begin(kEntries), std::end(kEntries),
                     [&](const char* e) { return name == e; });
}

void move_carried_entries(const fs::path& from, const fs::path& to) {
  std::vector<fs::path> carried;
  for (const auto& entry : fs::directory_iterator(from)) {
    const std::string name = entry.path().filename().string();
    if (!is_checkpoint_entry(name) && !fs::exists(to / name)) carried.push_back(entry.path());
  }
  for (const fs::path& p : carried)
    fs::rename(p, to / p.filename());
}

namespace {

// What Ember itself writes into a run directory, besides a checkpoint's own entries.
bool is_run_entry(const std::string& name) {
  if (name == "metrics.csv" || name == "metrics.svg" || is_checkpoint_entry(name)) return true;
  if (name.rfind("snapshot_", 0) == 0) return true;
  return name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos;
}

}  // namespace

void check_replaceable(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_directory(st)) {
    EMBER_THROW_AS(DataError, what, " ", dir.string(),
                   " exists and is not a directory; a model is a directory: give a new name");
  }
  if (is_checkpoint(dir)) return;
  std::vector<std::string> foreign;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!is_run_entry(name)) foreign.push_back(name);
  }
  if (foreign.empty()) return;
  std::sort(foreign.begin(), foreign.end());
  std::string shown;
  for (std::size_t i = 0; i < foreign.size() && i < 3; ++i)
    shown += (i ? ", '" : "'") + foreign[i] + "'";
  if (foreign.size() > 3) shown += cat(" and ", foreign.size() - 3, " more");
  EMBER_THROW_AS(DataError, what, " ", dir.string(),
                 " is a non-empty directory that is not an Ember checkpoint (it holds ", shown,
                 "); a save replaces its directory, so Ember writes only into a new or empty "
                 "directory, an Ember checkpoint or an Ember run directory");
}

}  // namespace ember::train
