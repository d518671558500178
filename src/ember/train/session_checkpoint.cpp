// Session's checkpoints: save (one checkpoint whatever the process count: rank 0 writes every
// file) and load (any process or rank count; the model checked against the configuration).
#include <fstream>
#include <iomanip>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/train/checkpoint.hpp"
#include "ember/train/checkpoint_recovery.hpp"
#include "ember/train/session.hpp"
#include "ember/train/session_impl.hpp"

namespace ember::train {

namespace fs = std::filesystem;
void Session::save(const fs::path& dir) {
  Impl& m = *impl_;
  settle_stepping();
  const SessionJob& job = m.job;
  if (!job.is_output_process()) {
    // Rank 0 (in process 0) writes every file: the other ranks send it their embedding rows
    // through the collectives, so the checkpoint is one, whatever the process count.
    const std::string failure = distributed::first_process_failure("");
    if (!failure.empty()) EMBER_THROW_AS(DataError, "saving ", dir.string(), ": ", failure);
    m.team->run([&](int r) { m.replicas[static_cast<std::size_t>(r)]->save(dir, true); });
    const std::string committed = distributed::first_process_failure("");
    if (!committed.empty()) EMBER_THROW_AS(DataError, "saving ", dir.string(), ": ", committed);
    return;
  }
  std::unique_ptr<CheckpointWriter> writer_ptr;
  std::string failure;
  try {
    writer_ptr = std::make_unique<CheckpointWriter>(dir);
  } catch (const std::exception& e) {
    if (!job.multi_process) throw;
    failure = e.what();
  }
  if (job.multi_process) failure = distributed::first_process_failure(failure);
  if (!failure.empty()) EMBER_THROW_AS(DataError, failure);
  CheckpointWriter& writer = *writer_ptr;
  m.team->run(
      [&](int r) { m.replicas[static_cast<std::size_t>(r)]->save(writer.staging(), true); });
  try {
    write_checkpoint_files(writer);
  } catch (const std::exception& e) {
    if (!job.multi_process) throw;
    failure = e.what();
  }
  if (job.multi_process) failure = distributed::first_process_failure(failure);
  if (!failure.empty()) EMBER_THROW_AS(DataError, failure);
}

void Session::write_checkpoint_files(CheckpointWriter& writer) {
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
  writer.commit(meta);
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
    // Process 0 repairs an interrupted save; then every process reads the same files (a
    // checkpoint of any process or rank count: every rank takes the embedding rows it owns).
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
  const nlohmann::json meta = verify_checkpoint(dir);
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
