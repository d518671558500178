// Session's checkpoints: save (one checkpoint whatever the process count: every rank writes its
// own embedding shard, in parallel, into process 0's temporary directory, and process 0 the
// dense files and meta.json) and load (any process or rank count; the model checked against the
// configuration).
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/distributed/process_world.hpp"
#include "ember/train/checkpoint.hpp"
#include "ember/train/checkpoint_recovery.hpp"
#include "ember/train/session.hpp"
#include "ember/train/session_impl.hpp"

namespace ember::train {

namespace fs = std::filesystem;
namespace {

// What one process wrote of a checkpoint: each of its ranks' rows per embedding, the files its
// ranks hashed, and its first failure ("" for none). Travels as JSON to every process.
nlohmann::json process_part(const std::vector<int>& ranks,
                            const std::vector<std::vector<std::int64_t>>& rows,
                            const std::vector<std::vector<CheckpointFile>>& files,
                            const std::vector<std::string>& failures) {
  nlohmann::json part;
  part["failure"] = "";
  for (const std::string& f : failures) {
    if (!f.empty()) {
      part["failure"] = f;
      break;
    }
  }
  part["ranks"] = nlohmann::json::array();
  part["files"] = nlohmann::json::array();
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    part["ranks"].push_back({{"rank", ranks[i]}, {"rows", rows[i]}});
    for (const auto& f : to_json(files[i]))
      part["files"].push_back(f);
  }
  return part;
}

// Every process's part, on every process: the files the ranks hashed, the shard layout (one
// shard per rank, one in all with one rank: each embedding's rows in each shard) and the first
// failure ("process <p>: ..." in a job of several processes).
struct GatheredSave {
  std::vector<CheckpointFile> hashed;
  nlohmann::json layout;
  std::string failure;
};

GatheredSave gather_save(const std::string& mine, bool multi_process, const ModelConfig& config) {
  const std::vector<std::string> parts = multi_process
                                             ? distributed::all_gather_process_strings(mine)
                                             : std::vector<std::string>{mine};
  GatheredSave out;
  std::map<int, std::vector<std::int64_t>> rows_by_rank;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const nlohmann::json part = nlohmann::json::parse(parts[p]);
    const std::string f = part.at("failure").get<std::string>();
    if (!f.empty() && out.failure.empty())
      out.failure = multi_process ? cat("process ", p, ": ", f) : f;
    for (const CheckpointFile& file : checkpoint_files_from_json(part.at("files")))
      out.hashed.push_back(file);
    for (const auto& r : part.at("ranks"))
      rows_by_rank[r.at("rank").get<int>()] = r.at("rows").get<std::vector<std::int64_t>>();
  }
  out.layout["shards"] = rows_by_rank.size();
  out.layout["embeddings"] = nlohmann::json::array();
  for (std::size_t e = 0; e < config.embeddings.size(); ++e) {
    nlohmann::json per_shard = nlohmann::json::array();
    for (const auto& [rank, counts] : rows_by_rank)
      per_shard.push_back(counts.at(e));
    out.layout["embeddings"].push_back({{"name", config.embeddings[e].name}, {"rows", per_shard}});
  }
  return out;
}

}  // namespace

void Session::save(const fs::path& dir) {
  Impl& m = *impl_;
  settle_stepping();
  const SessionJob& job = m.job;
  const bool output = job.is_output_process();
  // Process 0 creates the temporary directory; every process writes its ranks' shards into it
  // (the processes share a file system), so its name goes to every process.
  std::unique_ptr<CheckpointWriter> writer;
  std::string failure;
  if (output) {
    try {
      writer = std::make_unique<CheckpointWriter>(dir);
    } catch (const std::exception& e) {
      if (!job.multi_process) throw;
      failure = e.what();
    }
  }
  if (job.multi_process) failure = distributed::first_process_failure(failure);
  if (!failure.empty()) {
    if (output) EMBER_THROW_AS(DataError, failure);
    EMBER_THROW_AS(DataError, "saving ", dir.string(), ": ", failure);
  }
  const fs::path staging = job.multi_process ? fs::path(distributed::broadcast_from_process_0(
                                                   output ? writer->staging().string() : ""))
                                             : writer->staging();
  const auto local = static_cast<std::size_t>(m.team->size());
  std::vector<int> ranks(local);
  std::vector<std::vector<std::int64_t>> rows(local);
  std::vector<std::vector<CheckpointFile>> files(local);
  std::vector<std::string> failures(local);
  m.team->run([&](int r) {
    Replica& replica = *m.replicas[static_cast<std::size_t>(r)];
    ranks[static_cast<std::size_t>(r)] = replica.rank();
    // The embeddings' own failures are agreed on by every rank (all of them throw); a failure
    // of the dense files or of hashing is one rank's, and travels with the hashes below.
    Replica::Saved saved = replica.save(staging, true);
    rows[static_cast<std::size_t>(r)] = std::move(saved.rows);
    failures[static_cast<std::size_t>(r)] = std::move(saved.failure);
    // Each rank hashes the shards it wrote, in parallel with the others.
    try {
      files[static_cast<std::size_t>(r)] = replica.hash_own_shards(staging);
    } catch (const std::exception& e) {
      if (failures[static_cast<std::size_t>(r)].empty())
        failures[static_cast<std::size_t>(r)] = e.what();
    }
  });
  const GatheredSave gathered =
      gather_save(process_part(ranks, rows, files, failures).dump(), job.multi_process, config_);
  // Every process read the same parts: all of them throw, or none.
  if (!gathered.failure.empty()) {
    EMBER_THROW_AS(DataError, "saving ", dir.string(), ": ", gathered.failure);
  }
  if (output) {
    try {
      write_checkpoint_files(*writer, gathered.hashed, gathered.layout);
    } catch (const std::exception& e) {
      if (!job.multi_process) throw;
      failure = e.what();
    }
  }
  if (job.multi_process) failure = distributed::first_process_failure(failure);
  if (!failure.empty()) {
    if (output) EMBER_THROW_AS(DataError, failure);
    EMBER_THROW_AS(DataError, "saving ", dir.string(), ": ", failure);
  }
}

void Session::write_checkpoint_files(CheckpointWriter& writer,
                                     const std::vector<CheckpointFile>& hashed,
                                     const nlohmann::json& sparse_layout) {
  Impl& m = *impl_;
  {
    // The configuration as trained (after --set), so that eval and predict need only the model.
    const fs::path path = writer.staging() / "config.json";
    std::ofstream out(path);
    out << config_.json.dump(2) << "\n";
    out.flush();
    if (!out) EMBER_THROW_AS(DataError, "cannot write ", path.string(), " (disk full?)");
  }
  nlohmann::json meta;
  meta["iteration"] = iteration_;
  meta["skipped_batches"] = skipped_batches_;
  meta["config"] = config_.source;
  meta["devices"] = describe_devices();
  nlohmann::json names = nlohmann::json::array(), shapes = nlohmann::json::array();
  for (const auto& e : config_.embeddings) {
    names.push_back(e.name);
    shapes.push_back({{"name", e.name}, {"slot_num", e.slot_num}, {"vec_size", e.vec_size}});
  }
  meta["embeddings"] = names;
  meta["embedding_shapes"] = shapes;
  // What dense.model (trainable, in order) and dense.non_trainable hold, for tools reading them
  // and for the check that a checkpoint belongs to the model loading it.
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : m.replicas.front()->parameters().parameters()) {
    params.push_back(
        {{"name", p->name()}, {"shape", p->shape().to_vector()}, {"trainable", p->trainable()}});
  }
  meta["dense_parameters"] = params;
  meta["sparse_layout"] = sparse_layout;
  writer.commit(meta, hashed);
}

namespace {

std::string describe_parameter(const nlohmann::json& p) {
  return cat("'", p.at("name").get<std::string>(), "' ", p.at("shape").dump(),
             p.at("trainable").get<bool>() ? "" : " (not trainable)");
}

// Every dense tensor's name, shape and role, and every embedding's shape, as meta.json records
// them, against the model being loaded: a checkpoint of another network is refused even when its
// files happen to have the sizes this one needs.
void check_model_matches(const fs::path& dir, const nlohmann::json& meta, const ModelConfig& c,
                         const network::ParameterStore& store) {
  const std::string where = cat("checkpoint ", dir.string());
  const auto& names = meta.value("embeddings", nlohmann::json::array());
  for (const auto& e : c.embeddings) {
    if (std::find(names.begin(), names.end(), e.name) == names.end()) {
      EMBER_THROW_AS(DataError, where, " has no embedding '", e.name, "' (it holds ", names.dump(),
                     ")");
    }
  }
  for (const auto& saved : meta.value("embedding_shapes", nlohmann::json::array())) {
    for (const auto& e : c.embeddings) {
      if (saved.at("name").get<std::string>() != e.name) continue;
      const auto slots = saved.at("slot_num").get<std::int64_t>();
      const auto width = saved.at("vec_size").get<std::int64_t>();
      if (slots != e.slot_num || width != e.vec_size) {
        EMBER_THROW_AS(DataError, where, ": embedding '", e.name, "' has ", slots, " slots of ",
                       width, " there but ", e.slot_num, " slots of ", e.vec_size,
                       " in this configuration (a checkpoint of another model)");
      }
    }
  }
  if (!meta.contains("dense_parameters")) return;  // older checkpoints: the file sizes decide
  const auto& saved = meta.at("dense_parameters");
  nlohmann::json mine = nlohmann::json::array();
  for (const auto& p : store.parameters()) {
    mine.push_back(
        {{"name", p->name()}, {"shape", p->shape().to_vector()}, {"trainable", p->trainable()}});
  }
  const std::size_t n = std::min(saved.size(), mine.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (saved[i].at("name") != mine[i]["name"] || saved[i].at("shape") != mine[i]["shape"] ||
        saved[i].at("trainable") != mine[i]["trainable"]) {
      EMBER_THROW_AS(DataError, where, " holds another model: dense tensor ", i, " is ",
                     describe_parameter(saved[i]), " there but ", describe_parameter(mine[i]),
                     " in this configuration");
    }
  }
  if (saved.size() != mine.size()) {
    EMBER_THROW_AS(DataError, where, " holds another model: ", saved.size(),
                   " dense tensors there, ", mine.size(), " in this configuration (",
                   saved.size() > mine.size() ? cat("first extra: ", describe_parameter(saved[n]))
                                              : cat("first missing: ", describe_parameter(mine[n])),
                   ")");
  }
}

}  // namespace

void Session::load(const fs::path& dir, bool with_optimizer_states) {
  Impl& m = *impl_;
  // The next step reads from where the checkpoint stopped.
  end_stepping();
  m.has_stepped = false;
  if (m.job.multi_process) {
    // Process 0 repairs an interrupted save; then every rank reads its own shard (a checkpoint
    // of this job's sharding) or every shard, keeping the embedding rows it owns (any other
    // process or rank count).
    std::string failure;
    if (m.job.is_output_process()) {
      try {
        recover_checkpoint(dir);
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
    failure = distributed::first_process_failure(failure);
    if (!failure.empty()) EMBER_THROW_AS(DataError, failure);
  } else {
    recover_checkpoint(dir);
  }
  // Every file is checked, the processes sharing the work (the checkpoint is on a file system
  // they share); a failure anywhere fails every process.
  nlohmann::json meta;
  if (m.job.multi_process) {
    const distributed::ProcessWorld world = distributed::process_world();
    std::string failure;
    try {
      meta = verify_checkpoint(dir, world.rank, world.size);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    failure = distributed::first_process_failure(failure);
    if (!failure.empty()) EMBER_THROW_AS(DataError, failure);
  } else {
    meta = verify_checkpoint(dir);
  }
  std::int64_t iteration = 0, skipped = 0;
  try {
    check_model_matches(dir, meta, config_, m.replicas.front()->parameters());
    iteration = meta.value("iteration", std::int64_t{0});
    skipped = meta.value("skipped_batches", std::int64_t{0});
  } catch (const nlohmann::json::exception& e) {
    EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), ": meta.json is damaged (", e.what(),
                   ")");
  }
  if (iteration < 0 || skipped < 0 || skipped > iteration) {
    EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), ": meta.json is damaged (iteration ",
                   iteration, ", skipped batches ", skipped, ")");
  }
  // Skipped batches took no optimizer step.
  const std::int64_t steps = iteration - skipped;
  m.team->run([&](int r) {
    Replica& replica = *m.replicas[static_cast<std::size_t>(r)];
    replica.load(dir, with_optimizer_states);
    replica.resume_at(iteration, steps);
    for (const auto& e : replica.embeddings()) {
      if (with_optimizer_states && e->step() != steps) {
        EMBER_THROW_AS(DataError, "checkpoint ", dir.string(), ": embedding '", e->config().name,
                       "' took ", e->step(), " optimizer steps but the checkpoint records ", steps,
                       " (iteration ", iteration, ", ", skipped, " batches skipped)");
      }
    }
  });
  iteration_ = iteration;
  skipped_batches_ = skipped;
}

}  // namespace ember::train
