#include "ember/data/inspect.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "ember/core/error.hpp"
#include "ember/data/file_list.hpp"
#include "ember/data/host_batch.hpp"
#include "ember/data/norm_reader.hpp"
#include "ember/data/parquet/parquet_inspect.hpp"
#include "ember/data/raw_format.hpp"

namespace ember::data {

namespace fs = std::filesystem;
using nlohmann::json;

void append_json_float(std::string& out, float v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

namespace {

template <class Key>
void append_keys(std::string& line, const HostBatch& b, std::int64_t row) {
  const auto& layout = b.layout();
  bool first_slot = true;
  char buf[32];
  for (int i = 0; i < b.num_inputs(); ++i) {
    const std::int64_t slots = layout.sparse[static_cast<std::size_t>(i)].slot_num;
    const std::int64_t* off = b.row_offsets(i) + row * slots;
    const Key* values = b.values_as<Key>(i);
    for (std::int64_t k = 0; k < slots; ++k) {
      if (!first_slot) line += ',';
      first_slot = false;
      line += '[';
      for (std::int64_t j = off[k]; j < off[k + 1]; ++j) {
        if (j > off[k]) line += ',';
        const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, values[j]);
        line.append(buf, end);
      }
      line += ']';
    }
  }
}

}  // namespace

std::string sample_json_line(const HostBatch& b, std::int64_t row) {
  const auto& layout = b.layout();
  std::string line = "{\"label\":[";
  for (std::int64_t j = 0; j < layout.label_dim; ++j) {
    if (j > 0) line += ',';
    append_json_float(line, b.label()[row * layout.label_dim + j]);
  }
  line += "],\"dense\":[";
  for (std::int64_t j = 0; j < layout.dense_dim; ++j) {
    if (j > 0) line += ',';
    append_json_float(line, b.dense()[row * layout.dense_dim + j]);
  }
  line += "],\"slots\":[";
  if (layout.key_type == DType::U32) {
    append_keys<std::uint32_t>(line, b, row);
  } else {
    append_keys<std::int64_t>(line, b, row);
  }
  line += "]}";
  return line;
}

namespace {

// Prints samples handed over one at a time, honouring offset and limit.
class Printer {
 public:
  Printer(const InspectOptions& o, std::ostream& out) : o_(o), out_(out) {}
  bool want_more() const { return o_.limit < 0 || printed_ < o_.limit; }
  void take(const HostBatch& b) {
    for (std::int64_t i = 0; i < b.size() && want_more(); ++i) {
      if (skipped_ < o_.offset) {
        ++skipped_;
        continue;
      }
      out_ << sample_json_line(b, i) << '\n';
      ++printed_;
    }
  }
  std::int64_t printed() const { return printed_; }

 private:
  const InspectOptions& o_;
  std::ostream& out_;
  std::int64_t skipped_ = 0, printed_ = 0;
};

bool looks_like_file_list(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char buf[4096];
  in.read(buf, sizeof buf);
  const auto n = static_cast<std::size_t>(in.gcount());
  if (n == 0 || std::find(buf, buf + n, '\0') != buf + n) return false;
  std::size_t i = 0;
  while (i < n && (buf[i] == ' ' || buf[i] == '\t'))
    ++i;
  const std::size_t digits = i;
  while (i < n && buf[i] >= '0' && buf[i] <= '9')
    ++i;
  if (i == digits) return false;
  while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r'))
    ++i;
  return i == n || buf[i] == '\n';
}

CheckMode detect_file_check(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) EMBER_THROW_AS(DataError, "cannot open '", path, "'");
  char buf[16];
  in.read(buf, sizeof buf);
  CheckMode check = CheckMode::None;
  if (!detect_norm_check(buf, static_cast<std::size_t>(in.gcount()), &check)) {
    EMBER_THROW_AS(DataError, "'", path,
                   "' is neither a Norm data file (its header's error_check "
                   "is not 0 or 1) nor a file list; for a Raw file pass --format raw");
  }
  return check;
}

json header_json(const std::string& path, CheckMode check, const NormHeader& h) {
  return {{"file", path},
          {"check", check == CheckMode::Sum ? "sum" : "none"},
          {"error_check", h.error_check},
          {"number_of_records", h.number_of_records},
          {"label_dim", h.label_dim},
          {"dense_dim", h.dense_dim},
          {"slot_num", h.slot_num},
          {"reserved", {h.reserved[0], h.reserved[1], h.reserved[2]}}};
}

BatchLayout layout_of(const NormHeader& h, DType key_type, std::uint64_t file_size) {
  BatchLayout layout;
  layout.label_dim = h.label_dim;
  layout.dense_dim = h.dense_dim;
  layout.key_type = key_type;
  // No configuration to give a key budget: allow what the file could possibly hold.
  const auto budget = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(file_size / dtype_size(key_type)), 1, std::int64_t{1} << 22);
  layout.sparse.push_back({"slots", h.slot_num, budget, budget});
  return layout;
}

void inspect_norm_file(const std::string& path, CheckMode check, DType key_type, Printer& printer,
                       ReadCounters& counters) {
  const NormHeader h = read_norm_header(path, check);
  const BatchLayout layout = layout_of(h, key_type, fs::file_size(path));
  NormFileReader reader(layout, check, &counters);
  reader.open(path);
  HostBatch batch(layout, 1);
  while (!reader.done() && printer.want_more()) {
    batch.clear();
    reader.read(batch);
    printer.take(batch);
  }
}

}  // namespace

InspectSummary inspect_dataset(const InspectOptions& o, std::ostream& out) {
  EMBER_CHECK(o.offset >= 0, "inspect: --offset must not be negative, got ", o.offset);
  EMBER_CHECK(o.key_type == DType::U32 || o.key_type == DType::I64,
              "inspect: key type must be u32 or i64");
  if (!fs::exists(o.path)) EMBER_THROW_AS(DataError, "inspect: '", o.path, "' does not exist");
  Printer printer(o, out);
  ReadCounters counters;
  if (o.raw) {
    if (o.slot_num < 1) EMBER_THROW_AS(ConfigError, "inspect: a Raw file needs --slot-num");
    BatchLayout layout;
    layout.label_dim = o.label_dim;
    layout.dense_dim = o.dense_dim;
    layout.key_type = DType::I64;
    layout.sparse.push_back({"slots", o.slot_num, o.slot_num, 1});
    const std::uint64_t stride =
        4 * static_cast<std::uint64_t>(o.label_dim + o.dense_dim + o.slot_num);
    const std::uint64_t size = fs::file_size(o.path);
    const auto samples = static_cast<std::int64_t>(size / stride);
    json header = {{"format", "raw"},
                   {"file", o.path},
                   {"label_dim", o.label_dim},
                   {"dense_dim", o.dense_dim},
                   {"slot_num", o.slot_num},
                   {"slot_size_array", o.slot_size_array},
                   {"float_label_dense", o.float_label_dense},
                   {"stride", stride},
                   {"num_samples", samples},
                   {"trailing_bytes", size % stride}};
    out << header.dump() << '\n';
    InspectSummary s;
    if (samples > 0) {
      RawOptions raw;
      raw.path = o.path;
      raw.num_samples = samples;
      raw.float_label_dense = o.float_label_dense;
      raw.slot_size_array = o.slot_size_array;
      const RawSource source(raw, layout);
      HostBatch batch(layout, 1);
      // Raw has random access: the offset is a seek, not a skip.
      for (std::int64_t i = o.offset; i < samples && (o.limit < 0 || s.printed < o.limit); ++i) {
        batch.clear();
        source.read_samples(i, 1, batch);
        out << sample_json_line(batch, 0) << '\n';
        ++s.printed;
      }
    }
    return s;
  }
  if (parquet::has_parquet_magic(o.path)) return parquet::inspect_parquet(o, false, out);
  if (looks_like_file_list(o.path)) {
    const FileList list = read_file_list(o.path);
    if (!list.files.empty() && parquet::has_parquet_magic(list.files.front())) {
      return parquet::inspect_parquet(o, true, out);
    }
    json files = json::array();
    std::int64_t records = 0;
    std::vector<CheckMode> checks;
    for (const auto& f : list.files) {
      checks.push_back(detect_file_check(f));
      const NormHeader h = read_norm_header(f, checks.back());
      files.push_back(header_json(f, checks.back(), h));
      records += h.number_of_records;
    }
    out << json{{"format", "norm"},
                {"file_list", o.path},
                {"number_of_records", records},
                {"files", files}}
               .dump()
        << '\n';
    for (std::size_t i = 0; i < list.files.size() && printer.want_more(); ++i) {
      inspect_norm_file(list.files[i], checks[i], o.key_type, printer, counters);
    }
  } else {
    const CheckMode check = detect_file_check(o.path);
    json header = header_json(o.path, check, read_norm_header(o.path, check));
    header["format"] = "norm";
    out << header.dump() << '\n';
    inspect_norm_file(o.path, check, o.key_type, printer, counters);
  }
  InspectSummary s;
  s.printed = printer.printed();
  s.dropped = counters.dropped.load();
  s.first_drops = counters.first_drops();
  return s;
}

}  // namespace ember::data
