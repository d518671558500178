// `ember inspect` for Parquet: a file (with the `_metadata.json` of its folder) or a file list
// as the same JSON lines as Norm: a header object, then one {"label","dense","slots"} object per
// sample, keys as stored (no slot offsets).
#pragma once

#include <ostream>

#include "ember/data/inspect.hpp"
#include "ember/data/parquet/parquet_file.hpp"

namespace ember::data::parquet {

// `is_list`: options.path is a file list of Parquet files.
InspectSummary inspect_parquet(const InspectOptions& options, bool is_list, std::ostream& out);

}  // namespace ember::data::parquet
