#include "ember/data/parquet/parquet_inspect.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "ember/core/error.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/parquet/parquet_reader.hpp"
#include "ember/data/parquet/parquet_source.hpp"

namespace ember::data::parquet {

using nlohmann::json;

namespace {

std::vector<std::string> names(const std::vector<MetadataColumn>& columns) {
  std::vector<std::string> out;
  for (const auto& c : columns)
    out.push_back(c.col_name);
  return out;
}

json file_header(const std::string& path, const HugeCtrMetadata& m) {
  const ParquetFile f(path);
  json groups = json::array();
  for (const auto& g : f.metadata().row_groups)
    groups.push_back(g.num_rows);
  json columns = json::array();
  for (const auto& field : f.schema().fields) {
    json c = {{"name", field.name}, {"type", describe(f.schema(), field)}};
    if (field.shape != FieldShape::Unsupported && !f.metadata().row_groups.empty()) {
      const auto& meta =
          f.metadata().row_groups[0].columns[static_cast<std::size_t>(field.leaf)].meta_data;
      if (meta) c["compression"] = std::string(to_string(meta->codec));
    }
    columns.push_back(c);
  }
  return {{"file", path},
          {"metadata", m.path},
          {"num_rows", f.num_rows()},
          {"row_groups", groups},
          {"created_by", f.metadata().created_by},
          {"columns", columns}};
}

// A layout that holds whatever the files hold: keys as stored (i64), and for list columns a key
// budget as large as a file could need.
BatchLayout inspect_layout(const HugeCtrMetadata& m, const std::vector<std::string>& files) {
  BatchLayout layout;
  layout.label_dim = static_cast<std::int64_t>(m.labels.size());
  layout.dense_dim = static_cast<std::int64_t>(m.conts.size());
  layout.key_type = DType::I64;
  const auto slots = static_cast<std::int64_t>(m.cats.size());
  std::int64_t budget = slots;
  for (const auto& path : files) {
    const ParquetFile f(path);
    for (const auto& c : m.cats) {
      const TopLevelField* field = f.schema().find(c.col_name);
      if (field != nullptr && field->shape == FieldShape::List) {
        budget = std::max<std::int64_t>(
            budget, std::clamp<std::int64_t>(static_cast<std::int64_t>(f.data_end() / 2), slots,
                                             std::int64_t{1} << 22));
      }
    }
  }
  if (slots > 0) layout.sparse.push_back({"slots", slots, budget, budget});
  return layout;
}

}  // namespace

InspectSummary inspect_parquet(const InspectOptions& o, bool is_list, std::ostream& out) {
  std::vector<ParquetSource::File> files;
  if (is_list) {
    files = resolve_parquet_files(read_file_list(o.path));
  } else {
    auto m = std::make_shared<HugeCtrMetadata>(read_hugectr_metadata(metadata_path_for(o.path)));
    const std::int64_t rows = m->rows_of(o.path);
    if (rows < 0) {
      EMBER_THROW_AS(DataError, "Parquet metadata '", m->path, "' has no file_stats entry for '",
                     o.path, "'");
    }
    files.push_back({o.path, m, rows});
  }
  const HugeCtrMetadata& first = *files.front().metadata;
  json header;
  if (is_list) {
    json per_file = json::array();
    std::int64_t total = 0;
    for (const auto& f : files) {
      per_file.push_back(file_header(f.path, *f.metadata));
      total += f.rows;
    }
    header = {{"format", "parquet"},
              {"file_list", o.path},
              {"number_of_records", total},
              {"files", per_file}};
  } else {
    header = file_header(o.path, first);
    header["format"] = "parquet";
  }
  header["labels"] = names(first.labels);
  header["conts"] = names(first.conts);
  header["cats"] = names(first.cats);
  out << header.dump() << '\n';

  std::vector<std::string> paths;
  for (const auto& f : files)
    paths.push_back(f.path);
  const BatchLayout layout = inspect_layout(first, paths);
  ParquetFileReader reader(layout, {});
  HostBatch batch(layout, 256);
  InspectSummary s;
  std::int64_t skipped = 0;
  for (const auto& f : files) {
    reader.open(f.path, *f.metadata);
    while (!reader.done() && (o.limit < 0 || s.printed < o.limit)) {
      batch.clear();
      reader.read(batch);
      for (std::int64_t i = 0; i < batch.size() && (o.limit < 0 || s.printed < o.limit); ++i) {
        if (skipped < o.offset) {
          ++skipped;
          continue;
        }
        out << sample_json_line(batch, i) << '\n';
        ++s.printed;
      }
    }
    if (o.limit >= 0 && s.printed >= o.limit) break;
  }
  return s;
}

}  // namespace ember::data::parquet
