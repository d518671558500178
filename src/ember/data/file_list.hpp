// HugeCTR's file list: a text file whose first line is the number N of data files and whose next
// N lines are their paths. Relative paths resolve against the current directory (as HugeCTR
// does), then against the list's own directory.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ember::data {

struct FileList {
  std::string path;                // the list itself
  std::vector<std::string> files;  // resolved paths, in list order
};

// Reads and checks a list: a missing or unreadable list (or a directory), a binary file (a data
// file given where its list belongs), a first line that is not a positive count, fewer paths
// than announced, or a data file that does not exist or is not a file are DataErrors naming the
// list and the line. Text quoted from the list is shown with unprintable bytes escaped.
FileList read_file_list(const std::string& path);

// Whether the first bytes of a file look binary (a NUL, or many bytes that are neither
// printable ASCII, whitespace nor UTF-8): a data file, not a text file list.
bool looks_binary(const char* bytes, std::size_t size);
FileList read_file_list(const std::string& path);

// Writes a list of `files` (written as given).
void write_file_list(const std::string& path, const std::vector<std::string>& files);

}  // namespace ember::data
