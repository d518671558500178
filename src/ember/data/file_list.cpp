#include "ember/data/file_list.hpp"

#include <charconv>
#include <filesystem>
#include <fstream>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/path_check.hpp"
#include "ember/data/norm_format.hpp"

namespace ember::data {

namespace fs = std::filesystem;

namespace {
std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// A line of the list as a message may quote it: at most 80 characters, unprintable bytes as \xNN.
std::string quoted(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (text.size() > 80) out += "...";
  return out;
}

}  // namespace

bool looks_binary(const char* bytes, std::size_t size) {
  std::size_t odd = 0;
  for (std::size_t i = 0; i < size; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0) return true;
    const bool text = (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\r' || c == '\t' || c >= 0x80;
    if (!text) ++odd;
  }
  // Control bytes are rare in text; a few percent of them is binary.
  return odd > 0 && odd * 20 >= size;
}

FileList read_file_list(const std::string& path) {
  if (const std::string problem = file_problem(path, /*regular_only=*/false); !problem.empty()) {
    EMBER_THROW_AS(DataError, "file list '", path, "' ", problem);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) EMBER_THROW_AS(DataError, "file list '", path, "' cannot be opened");
  {
    // A data file given where its list belongs would otherwise be quoted byte for byte.
    char head[512];
    in.read(head, sizeof head);
    const auto n = static_cast<std::size_t>(in.gcount());
    CheckMode check;
    if (looks_binary(head, n) || detect_norm_check(head, n, &check)) {
      EMBER_THROW_AS(DataError, "file list '", path,
                     "' looks like a data file, not a file list (expected a count then paths, "
                     "one a line)");
    }
    in.clear();
    in.seekg(0);
  }
  FileList list;
  list.path = path;
  std::string line;
  if (!std::getline(in, line)) {
    EMBER_THROW_AS(DataError, "file list '", path,
                   "' line 1: empty file, expected the number of "
                   "data files");
  }
  const std::string count_text = trim(line);
  long long count = 0;
  const auto [end, ec] =
      std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
  if (ec != std::errc() || end != count_text.data() + count_text.size() || count <= 0) {
    EMBER_THROW_AS(DataError, "file list '", path,
                   "' line 1: expected a positive number of data files, got '", quoted(count_text),
                   "'");
  }
  const fs::path list_dir = fs::path(path).parent_path();
  for (long long i = 0; i < count; ++i) {
    const long long line_number = i + 2;
    if (!std::getline(in, line)) {
      EMBER_THROW_AS(DataError, "file list '", path, "' announces ", count,
                     " data files on line 1 but ends at line ", line_number - 1);
    }
    const std::string name = trim(line);
    if (name.empty()) {
      EMBER_THROW_AS(DataError, "file list '", path, "' line ", line_number,
                     ": empty line where data file ", i + 1, " of ", count, " should be");
    }
    // As given (HugeCTR's rule), else beside the list; a path that exists but is no data file
    // (a directory) is named as such rather than as missing.
    std::error_code err;
    fs::path resolved = name;
    if (!fs::exists(resolved, err)) {
      const fs::path beside = list_dir / name;
      if (fs::path(name).is_relative() && fs::exists(beside, err)) {
        resolved = beside;
      } else {
        EMBER_THROW_AS(DataError, "file list '", path, "' line ", line_number, ": data file '",
                       quoted(name), "' does not exist",
                       fs::path(name).is_relative()
                           ? cat(" (looked in the current directory and in '",
                                 list_dir.empty() ? "." : list_dir.string(), "')")
                           : std::string());
      }
    }
    if (const std::string problem = file_problem(resolved); !problem.empty()) {
      EMBER_THROW_AS(DataError, "file list '", path, "' line ", line_number, ": data file '",
                     resolved.string(), "' ", problem);
    }
    list.files.push_back(resolved.string());
  }
  while (std::getline(in, line)) {
    if (!trim(line).empty()) {
      log_once("file list extra lines " + path, spdlog::level::warn,
               cat("file list '", path, "' has lines after the ", count,
                   " announced data files; they are ignored"));
      break;
    }
  }
  return list;
}

void write_file_list(const std::string& path, const std::vector<std::string>& files) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) EMBER_THROW_AS(DataError, "cannot write file list '", path, "'");
  out << files.size() << '\n';
  for (const auto& f : files)
    out << f << '\n';
  out.flush();
  if (!out) EMBER_THROW_AS(DataError, "error writing file list '", path, "'");
}

}  // namespace ember::data
