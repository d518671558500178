// A Parquet file's schema as Ember reads it: the top-level fields by name, each either a plain
// column (one value per row) or a list column (LIST-annotated three-level or legacy two-level
// group over one leaf; HugeCTR's multi-hot slots), with the definition and repetition levels
// that encode them. Anything else (structs, maps, lists of lists) is named but not readable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/data/parquet/parquet_metadata.hpp"

namespace ember::data::parquet {

struct LeafColumn {
  int chunk = 0;  // index of its column chunk in every row group
  std::vector<std::string> path;
  PhysicalType type = PhysicalType::Int64;
  const SchemaElement* element = nullptr;
  std::int16_t max_definition = 0;
  std::int16_t max_repetition = 0;
};

enum class FieldShape { Plain, List, Unsupported };

struct TopLevelField {
  std::string name;
  FieldShape shape = FieldShape::Unsupported;
  int leaf = -1;  // Plain and List: the leaf column
  // List: the definition level of a present but empty list (lower: a null list; between it and
  // the leaf's maximum: a null element).
  std::int16_t empty_list_definition = 0;
  std::string why;  // Unsupported: what it is
};

struct ParquetSchema {
  std::vector<LeafColumn> leaves;
  std::vector<TopLevelField> fields;

  const TopLevelField* find(const std::string& name) const;
};

// Builds the schema tree from the footer's flattened elements; a malformed tree (children past
// the end, a leaf without a type) is a DataError naming `what`.
ParquetSchema build_schema(const FileMetaData& metadata, const std::string& what);

// "INT64", "list<INT64>", ... for messages.
std::string describe(const ParquetSchema& schema, const TopLevelField& field);

}  // namespace ember::data::parquet
