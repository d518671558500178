#include "ember/data/parquet/parquet_schema.hpp"

#include "ember/core/error.hpp"

namespace ember::data::parquet {

const TopLevelField* ParquetSchema::find(const std::string& name) const {
  for (const auto& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

namespace {

struct Walker {
  const std::vector<SchemaElement>& elements;
  const std::string& what;
  ParquetSchema& schema;
  std::size_t next = 1;  // elements[0] is the root

  [[noreturn]] void fail(const std::string& problem) const {
    EMBER_THROW_AS(DataError, what, ": malformed schema: ", problem);
  }

  // Walks the element at `next` and its subtree; appends its leaves.
  void walk(std::vector<std::string>& path, std::int16_t def, std::int16_t rep, int depth) {
    if (next >= elements.size()) fail("a group claims more children than the schema holds");
    if (depth > 32) fail("groups nested deeper than 32");
    const SchemaElement& e = elements[next++];
    const Repetition r = e.repetition.value_or(Repetition::Required);
    if (r == Repetition::Optional) ++def;
    if (r == Repetition::Repeated) {
      ++def;
      ++rep;
    }
    path.push_back(e.name);
    if (e.num_children > 0) {
      for (int c = 0; c < e.num_children; ++c)
        walk(path, def, rep, depth + 1);
    } else {
      if (!e.type) fail("leaf '" + e.name + "' has no physical type");
      LeafColumn leaf;
      leaf.chunk = static_cast<int>(schema.leaves.size());
      leaf.path = path;
      leaf.type = *e.type;
      leaf.element = &e;
      leaf.max_definition = def;
      leaf.max_repetition = rep;
      schema.leaves.push_back(std::move(leaf));
    }
    path.pop_back();
  }
};

// Classifies a top-level field from its leaves (first_leaf .. leaves.size()).
void classify(ParquetSchema& schema, TopLevelField& f, const SchemaElement& top,
              const std::vector<SchemaElement>& elements, std::size_t top_index,
              std::size_t first_leaf) {
  const std::size_t leaf_count = schema.leaves.size() - first_leaf;
  if (leaf_count != 1) {
    f.why = "a group of " + std::to_string(leaf_count) + " columns";
    return;
  }
  const LeafColumn& leaf = schema.leaves[first_leaf];
  f.leaf = static_cast<int>(first_leaf);
  const Repetition top_rep = top.repetition.value_or(Repetition::Required);
  if (top.num_children == 0) {
    if (top_rep == Repetition::Repeated) {
      // A bare repeated primitive: a list of its values (empty list: level 0).
      f.shape = leaf.max_repetition == 1 ? FieldShape::List : FieldShape::Unsupported;
      f.empty_list_definition = 0;
      return;
    }
    f.shape = FieldShape::Plain;
    return;
  }
  if (leaf.max_repetition != 1) {
    f.why = leaf.max_repetition == 0 ? "a struct" : "a nested list";
    return;
  }
  // A list: the top group (LIST-annotated, or not, as some old writers left it) with one
  // repeated child, which is the leaf itself (two levels) or a group holding the leaf.
  if (top_rep == Repetition::Repeated) {
    f.why = "a repeated group";
    return;
  }
  const SchemaElement& child = elements[top_index + 1];
  if (child.repetition.value_or(Repetition::Required) != Repetition::Repeated) {
    f.why = top.is_list_annotated() ? "a list of an unexpected layout" : "a struct";
    return;
  }
  f.shape = FieldShape::List;
  f.empty_list_definition = top_rep == Repetition::Optional ? 1 : 0;
}

}  // namespace

ParquetSchema build_schema(const FileMetaData& metadata, const std::string& what) {
  ParquetSchema schema;
  const auto& elements = metadata.schema;
  Walker w{elements, what, schema};
  if (elements.empty()) w.fail("no root element");
  const int top_count = elements[0].num_children;
  if (top_count < 0) w.fail("a negative child count");
  for (int t = 0; t < top_count; ++t) {
    const std::size_t top_index = w.next;
    const std::size_t first_leaf = schema.leaves.size();
    std::vector<std::string> path;
    w.walk(path, 0, 0, 0);
    TopLevelField f;
    f.name = elements[top_index].name;
    classify(schema, f, elements[top_index], elements, top_index, first_leaf);
    schema.fields.push_back(std::move(f));
  }
  if (w.next != elements.size()) {
    w.fail(std::to_string(elements.size() - w.next) + " elements outside the root's children");
  }
  return schema;
}

std::string describe(const ParquetSchema& schema, const TopLevelField& field) {
  if (field.shape == FieldShape::Unsupported) return field.why;
  const LeafColumn& leaf = schema.leaves[static_cast<std::size_t>(field.leaf)];
  std::string type(to_string(leaf.type));
  if (leaf.element->is_unsigned()) type += " (unsigned)";
  if (leaf.element->logical_kind == SchemaElement::kLogicalString ||
      leaf.element->converted_type == 0) {
    type += " (string)";
  }
  return field.shape == FieldShape::List ? "list<" + type + ">" : type;
}

}  // namespace ember::data::parquet
