// Checkpoints: a directory holding everything needed to resume training with the same next step
// or to evaluate a model.
//
//   meta.json               format, version, iteration, the files with their sizes and hashes
//   dense.model             every trainable dense parameter, f32, in layer order, packed
//                           (HugeCTR's dense model file layout)
//   dense.non_trainable     non-trainable dense state (BatchNorm running statistics), f32
//   dense_opt_states.model  the dense optimizer's state slots, each in dense.model's layout
//   sparse/<embedding>/     each embedding's keys, vectors and optimizer states
//                           (SparseEmbedding::save's layout: the files themselves with one rank,
//                           one shard rank_<r>/ per rank with several, each written by its rank)
//   config.json             the configuration the model was trained with (after --set)
//
// A checkpoint is written under a temporary name beside its final one (<dir>.tmp-<pid>-<n>) and
// renamed into place only when complete; an older checkpoint of the same name is moved aside
// (<dir>.old-<pid>) for the instant of the swap, and whatever it held that is not part of a
// checkpoint (a run's metrics.csv, snapshots written under it, a user's notes) moves into the new
// one. A crash at any moment leaves the earlier checkpoint intact or recoverable
// (checkpoint_recovery.hpp). Loading verifies every file's size and hash before reading anything,
// and refuses a truncated or altered checkpoint with an error naming the file and the numbers.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ember/tensor/tensor.hpp"

namespace ember::train {

inline constexpr int kCheckpointVersion = 1;

// A fast 64-bit content hash of a file (not cryptographic: it catches truncation and damage).
std::uint64_t hash_file(const std::filesystem::path& path);

// Writes a tensor's elements (any place; contiguous copy through the host) as raw bytes.
void write_raw(std::ofstream& out, const Tensor& t, const std::filesystem::path& path);
// Reads exactly t.nbytes() bytes into `t` (any place), naming the file on a short read.
void read_raw(std::ifstream& in, const Tensor& t, const std::filesystem::path& path);

// A file of a checkpoint as meta.json lists it: its path relative to the checkpoint, size, hash.
struct CheckpointFile {
  std::string path;
  std::uint64_t bytes = 0;
  std::uint64_t hash = 0;
};
nlohmann::json to_json(const std::vector<CheckpointFile>& files);
std::vector<CheckpointFile> checkpoint_files_from_json(const nlohmann::json& files);

// Every regular file under `root`/`sub` (recursively), hashed, its path relative to `root`.
// How each rank hashes the shard it wrote, in parallel with the others.
std::vector<CheckpointFile> hash_files_under(const std::filesystem::path& root,
                                             const std::filesystem::path& sub);

// A checkpoint being written: files go into a temporary directory; commit() records their
// hashes in meta.json and renames the directory into place (replacing an older checkpoint of
// the same name only at that moment). Several processes may write into the temporary directory
// (a shared file system), each hashing its own files for commit().
class CheckpointWriter {
 public:
  // Fails at once when `final_dir` exists and is not a directory Ember may replace
  // (check_replaceable).
  explicit CheckpointWriter(std::filesystem::path final_dir);
  ~CheckpointWriter();  // removes the temporary directory unless committed
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  const std::filesystem::path& staging() const { return staging_; }
  // `meta` gets "format", "version" and "files" added: the `hashed` files (hashed by the ranks
  // that wrote them) and every other file in the temporary directory, hashed here. Entries of an
  // existing directory of the same name that are not checkpoint contents (a run's metrics.csv,
  // its snapshots) move into the new one by rename, so open handles to them stay valid; they are
  // not part of the checkpoint.
  void commit(nlohmann::json meta, const std::vector<CheckpointFile>& hashed = {});

 private:
  std::filesystem::path final_, staging_;
  bool committed_ = false;
};

// Reads meta.json and checks every file it lists (size and hash) and that no listed file is
// missing. Throws DataError naming the checkpoint, the file and the numbers (a damaged meta.json
// included: never a JSON library's own error).
// With `parts` > 1 only every parts-th listed file from the `part`-th is checked (the processes
// of a job share the work; each process checks its part and the failures are agreed on).
nlohmann::json verify_checkpoint(const std::filesystem::path& dir, int part = 0, int parts = 1);

// True when `dir` holds a meta.json that reads as an Ember checkpoint's (nothing else checked).
bool is_checkpoint(const std::filesystem::path& dir);

// The names a checkpoint's own entries have at its top level; everything else in a checkpoint
// directory (metrics.csv, snapshots, a user's files) is carried over when it is replaced.
bool is_checkpoint_entry(const std::string& name);

// Moves every entry of `from` that is not a checkpoint entry and is absent from `to` into `to`
// (by rename: open files stay valid). Used when a checkpoint replaces an older one.
void move_carried_entries(const std::filesystem::path& from, const std::filesystem::path& to);

// Throws DataError unless `dir` is absent, empty, an Ember checkpoint, or holds only what Ember
// writes into a run directory (metrics.csv, metrics.svg, snapshot_<n>, leftovers of interrupted
// saves): a save replaces it, and Ember never replaces a user's directory. `what` names the
// directory's role in the message ("--model-out").
void check_replaceable(const std::filesystem::path& dir, const std::string& what);

}  // namespace ember::train
