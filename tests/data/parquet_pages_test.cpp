// The reader's page paths on files laid out byte by byte here (so that every path is reached
// whatever a writer would choose): definition levels as one RLE run, as bit-packed groups or
// mixed, with a null anywhere; dictionary indices of every bit width 1 to 32; SNAPPY pages held
// in one literal (read in place) or not (decoded), data pages v1 and v2; keys at the edges of
// their range. Row counts 1, 7, 1023 and 65537, in one page or several.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "data/parquet_test_support.hpp"
#include "ember/core/error.hpp"
#include "ember/data/output_file.hpp"
#include "ember/data/parquet/encoding.hpp"
#include "ember/data/parquet/parquet_file.hpp"
#include "ember/data/parquet/parquet_metadata.hpp"
#include "ember/data/parquet/parquet_writer.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

namespace fs = std::filesystem;
using datatest::Sample;
using parquet::Codec;
using parquet::Encoding;
using parquet::PhysicalType;
using Bytes = std::vector<std::byte>;

void put_varint(std::uint64_t v, Bytes& out) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::byte>(v));
}

template <class T>
void put(T v, Bytes& out) {
  const auto at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

// How a page's definition levels (all 1 but where `nulls` says) are encoded.
enum class Levels { OneRun, BitPacked, Mixed };

Bytes encode_levels(std::size_t n, Levels how, const std::vector<std::size_t>& nulls) {
  std::vector<std::uint32_t> levels(n, 1);
  for (std::size_t i : nulls)
    levels[i] = 0;
  Bytes out;
  if (how == Levels::BitPacked || (how == Levels::OneRun && !nulls.empty())) {
    const std::size_t groups = (n + 7) / 8;
    put_varint((groups << 1) | 1, out);
    for (std::size_t g = 0; g < groups; ++g) {
      std::uint8_t b = 0;
      for (std::size_t i = 0; i < 8 && 8 * g + i < n; ++i)
        b |= static_cast<std::uint8_t>(levels[8 * g + i] << i);
      out.push_back(static_cast<std::byte>(b));
    }
  } else if (how == Levels::OneRun) {
    put_varint(n << 1, out);
    out.push_back(std::byte{1});
  } else {
    parquet::encode_rle(levels.data(), n, 1, out);  // runs where long, groups elsewhere
  }
  return out;
}

// A SNAPPY page as one literal (what snappy writes for bytes it cannot compress: read in place)
// or as two literals (decoded); built here, so no libsnappy is needed.
Bytes snappy_literals(const Bytes& raw, bool one) {
  Bytes out;
  put_varint(raw.size(), out);
  const auto literal = [&](std::size_t from, std::size_t n) {
    if (n == 0) return;
    out.push_back(std::byte{63 << 2});  // four length bytes
    put(static_cast<std::uint32_t>(n - 1), out);
    out.insert(out.end(), raw.begin() + static_cast<std::ptrdiff_t>(from),
               raw.begin() + static_cast<std::ptrdiff_t>(from + n));
  };
  const std::size_t split = one ? raw.size() : raw.size() / 2;
  literal(0, split);
  literal(split, raw.size() - split);
  return out;
}

struct Page {
  std::int32_t count = 0;
  Encoding encoding = Encoding::Plain;
  Bytes levels;  // definition levels' RLE bytes (optional columns)
  Bytes values;  // PLAIN values, or [bit width][indices]
};

struct Chunk {
  PhysicalType type = PhysicalType::Int64;
  bool optional = false;
  std::optional<std::vector<std::int64_t>> dictionary;
  std::vector<Page> pages;
};

struct FileSpec {
  Codec codec = Codec::Uncompressed;
  bool v2 = false;
  bool one_literal = true;  // SNAPPY pages: one literal or two
};

// Writes `chunks` (column 'label', then 'C1') as one row group of `rows` rows, with its
// `_metadata.json` and file list; returns the list.
std::string write_file(const fs::path& dir, std::int64_t rows, const std::vector<Chunk>& chunks,
                       const FileSpec& spec) {
  const std::string path = (dir / "part_0.parquet").string();
  parquet::FileMetaData footer;
  parquet::SchemaElement root;
  root.name = "schema";
  root.num_children = static_cast<std::int32_t>(chunks.size());
  footer.schema.push_back(root);
  const std::vector<std::string> names = {"label", "C1"};
  Bytes file;
  const auto magic = [&] {
    for (char c : parquet::kParquetMagic)
      file.push_back(static_cast<std::byte>(c));
  };
  magic();
  parquet::RowGroup group;
  group.num_rows = rows;
  const auto compress = [&](const Bytes& raw) {
    return spec.codec == Codec::Snappy ? snappy_literals(raw, spec.one_literal) : raw;
  };
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const Chunk& chunk = chunks[c];
    parquet::SchemaElement e;
    e.name = names[c];
    e.type = chunk.type;
    e.repetition = chunk.optional ? parquet::Repetition::Optional : parquet::Repetition::Required;
    footer.schema.push_back(e);
    parquet::ColumnMetaData meta;
    meta.type = chunk.type;
    meta.encodings = {Encoding::Plain, Encoding::Rle, Encoding::RleDictionary};
    meta.path_in_schema = {names[c]};
    meta.codec = spec.codec;
    const auto start = static_cast<std::int64_t>(file.size());
    const auto page_out = [&](parquet::PageHeader h, const Bytes& stored, std::size_t raw) {
      h.uncompressed_page_size = static_cast<std::int32_t>(raw);
      h.compressed_page_size = static_cast<std::int32_t>(stored.size());
      parquet::append_page_header(h, file);
      file.insert(file.end(), stored.begin(), stored.end());
    };
    if (chunk.dictionary) {
      meta.dictionary_page_offset = start;
      Bytes raw;
      for (std::int64_t v : *chunk.dictionary)
        put(v, raw);
      parquet::PageHeader h;
      h.type = parquet::PageType::DictionaryPage;
      h.dictionary_page = parquet::DictionaryPageHeader{
          static_cast<std::int32_t>(chunk.dictionary->size()), Encoding::Plain};
      page_out(h, compress(raw), raw.size());
    }
    meta.data_page_offset = static_cast<std::int64_t>(file.size());
    for (const Page& p : chunk.pages) {
      parquet::PageHeader h;
      if (!spec.v2) {
        Bytes raw;
        if (chunk.optional) {
          put(static_cast<std::uint32_t>(p.levels.size()), raw);
          raw.insert(raw.end(), p.levels.begin(), p.levels.end());
        }
        raw.insert(raw.end(), p.values.begin(), p.values.end());
        h.type = parquet::PageType::DataPage;
        h.data_page = parquet::DataPageHeader{p.count, p.encoding, Encoding::Rle, Encoding::Rle};
        page_out(h, compress(raw), raw.size());
      } else {
        // v2: levels first, never compressed, then the values.
        Bytes stored = chunk.optional ? p.levels : Bytes{};
        const Bytes values = compress(p.values);
        stored.insert(stored.end(), values.begin(), values.end());
        h.type = parquet::PageType::DataPageV2;
        parquet::DataPageHeaderV2 v2;
        v2.num_values = p.count;
        v2.num_rows = p.count;
        v2.encoding = p.encoding;
        v2.definition_levels_byte_length =
            chunk.optional ? static_cast<std::int32_t>(p.levels.size()) : 0;
        h.data_page_v2 = v2;
        page_out(h, stored, (chunk.optional ? p.levels.size() : 0) + p.values.size());
      }
      meta.num_values += p.count;
    }
    meta.total_compressed_size = static_cast<std::int64_t>(file.size()) - start;
    meta.total_uncompressed_size = meta.total_compressed_size;
    parquet::ColumnChunk cc;
    cc.file_offset = start;
    cc.meta_data = meta;
    group.columns.push_back(cc);
  }
  footer.num_rows = rows;
  footer.row_groups.push_back(group);
  footer.created_by = "ember test";
  Bytes tail;
  parquet::append_file_metadata(footer, tail);
  file.insert(file.end(), tail.begin(), tail.end());
  put(static_cast<std::uint32_t>(tail.size()), file);
  magic();
  {
    OutputFile out(path);
    out.write(file.data(), file.size());
    out.close();
  }
  const std::string list = (dir / "_file_list.txt").string();
  parquet::write_parquet_layout(dir.string(), list, {{path, rows}},
                                parquet::ParquetWriterOptions::with_default_names(1, 0, 1));
  return list;
}

// Page sizes for n rows: one page, or pieces of odd sizes.
std::vector<std::int64_t> page_sizes(std::mt19937_64& rng, std::int64_t n, bool split) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t at = 0; at < n;) {
    const std::int64_t s = split ? std::min<std::int64_t>(n - at, 1 + rng() % 5000) : n;
    sizes.push_back(s);
    at += s;
  }
  return sizes;
}

std::vector<Sample> read(const std::string& list, DType key_type,
                         const std::vector<std::int64_t>& slot_sizes = {}) {
  return parquettest::read_list(list, parquettest::fixture_layout(0, 1, 1, key_type), slot_sizes,
                                1000);
}

TEST(ParquetPages, DefinitionLevelsAsOneRunBitPackedOrMixed) {
  auto rng = testing::make_rng();
  for (std::int64_t n : {1, 7, 1023, 65537}) {
    for (Levels how : {Levels::OneRun, Levels::BitPacked, Levels::Mixed}) {
      for (bool split : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " levels " << static_cast<int>(how)
                                          << (split ? " split" : ""));
        std::vector<Sample> expected;
        std::vector<Chunk> chunks(2);
        chunks[0].type = PhysicalType::Float;
        chunks[0].optional = chunks[1].optional = true;
        std::int64_t row = 0;
        for (std::int64_t size : page_sizes(rng, n, split)) {
          Page label, key;
          label.count = key.count = static_cast<std::int32_t>(size);
          label.levels = key.levels = encode_levels(static_cast<std::size_t>(size), how, {});
          for (std::int64_t i = 0; i < size; ++i, ++row) {
            Sample s;
            s.label = {static_cast<float>(rng() % 2)};
            s.slots = {{static_cast<std::int64_t>(rng() % 100000)}};
            put(s.label[0], label.values);
            put(s.slots[0][0], key.values);
            expected.push_back(s);
          }
          chunks[0].pages.push_back(label);
          chunks[1].pages.push_back(key);
        }
        testing::ScratchDir dir;
        EXPECT_EQ(read(write_file(dir.path(), n, chunks, {}), DType::U32), expected);
      }
    }
  }
}

TEST(ParquetPages, ANullIsFoundWhereverItsLevelLies) {
  auto rng = testing::make_rng();
  for (std::int64_t n : {1, 7, 1023, 65537}) {
    for (Levels how : {Levels::OneRun, Levels::BitPacked, Levels::Mixed}) {
      // One-run pages with a null are written bit-packed (a run cannot hold a null).
      const auto null_row = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(n));
      std::vector<Chunk> chunks(2);
      chunks[0].type = PhysicalType::Float;
      chunks[0].optional = chunks[1].optional = true;
      Page label, key;
      label.count = key.count = static_cast<std::int32_t>(n);
      label.levels = encode_levels(static_cast<std::size_t>(n), how, {});
      key.levels = encode_levels(static_cast<std::size_t>(n), how, {null_row});
      for (std::int64_t i = 0; i < n; ++i) {
        put(1.0f, label.values);
        if (static_cast<std::size_t>(i) != null_row) put(std::int64_t{5}, key.values);
      }
      chunks[0].pages.push_back(label);
      chunks[1].pages.push_back(key);
      testing::ScratchDir dir;
      const std::string list = write_file(dir.path(), n, chunks, {});
      EMBER_EXPECT_THROW_WITH(read(list, DType::U32), DataError,
                              cat("column 'C1': row ", null_row, " is null"));
    }
  }
}

TEST(ParquetPages, DictionaryIndicesOfEveryBitWidth) {
  auto rng = testing::make_rng();
  for (int width = 1; width <= 32; ++width) {
    for (std::int64_t n : {1, 7, 1023, 65537}) {
      if (n == 65537 && width % 8 != 1 && width % 8 != 0) continue;  // a few widths at full size
      // Indices may be wider than the dictionary needs; any width up to 32 must read.
      const std::size_t entries =
          std::min<std::size_t>(std::size_t{1} << std::min(width, 20), width <= 12 ? 4096 : 3000);
      SCOPED_TRACE(::testing::Message() << "width " << width << " n " << n);
      std::vector<Chunk> chunks(2);
      chunks[0].type = PhysicalType::Float;
      chunks[1].dictionary.emplace();
      for (std::size_t i = 0; i < entries; ++i)
        chunks[1].dictionary->push_back(static_cast<std::int64_t>(rng() % 1000000));
      std::vector<Sample> expected;
      for (std::int64_t size : page_sizes(rng, n, width % 2 == 0)) {
        Page label, key;
        label.count = key.count = static_cast<std::int32_t>(size);
        key.encoding = Encoding::RleDictionary;
        key.values.push_back(static_cast<std::byte>(width));
        std::vector<std::uint32_t> indices;
        for (std::int64_t i = 0; i < size; ++i) {
          // Runs of one index now and then, so both run kinds appear.
          const auto index = rng() % 3 == 0 && !indices.empty()
                                 ? indices.back()
                                 : static_cast<std::uint32_t>(rng() % entries);
          indices.push_back(index);
          Sample s;
          s.label = {static_cast<float>(i % 2)};
          s.slots = {{(*chunks[1].dictionary)[index]}};
          put(s.label[0], label.values);
          expected.push_back(s);
        }
        parquet::encode_rle(indices.data(), indices.size(), width, key.values);
        chunks[0].pages.push_back(label);
        chunks[1].pages.push_back(key);
      }
      for (DType key_type : {DType::U32, DType::I64}) {
        testing::ScratchDir dir;
        ASSERT_EQ(read(write_file(dir.path(), n, chunks, {}), key_type), expected);
      }
    }
  }
}

TEST(ParquetPages, DictionaryIndexPastTheDictionaryIsAnError) {
  for (int width : {3, 17, 32}) {
    std::vector<Chunk> chunks(2);
    chunks[0].type = PhysicalType::Float;
    chunks[1].dictionary = std::vector<std::int64_t>{10, 20, 30, 40, 50};
    Page label, key;
    label.count = key.count = 1023;
    key.encoding = Encoding::RleDictionary;
    key.values.push_back(static_cast<std::byte>(width));
    std::vector<std::uint32_t> indices;
    for (std::uint32_t i = 0; i < 1023; ++i) {
      indices.push_back(i == 700 ? 5 : i % 5);
      put(0.0f, label.values);
    }
    parquet::encode_rle(indices.data(), indices.size(), width, key.values);
    chunks[0].pages.push_back(label);
    chunks[1].pages.push_back(key);
    testing::ScratchDir dir;
    const std::string list = write_file(dir.path(), 1023, chunks, {});
    EMBER_EXPECT_THROW_WITH(read(list, DType::U32), DataError,
                            "dictionary index 5 past the dictionary's 5 entries");
  }
}

TEST(ParquetPages, SnappyPagesInOneLiteralReadInPlaceLikeDecodedOnes) {
  auto rng = testing::make_rng();
  for (std::int64_t n : {1, 7, 1023, 65537}) {
    for (bool v2 : {false, true}) {
      for (bool optional : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "n " << n << (v2 ? " v2" : " v1") << (optional ? " optional" : ""));
        std::vector<Chunk> chunks(2);
        chunks[0].type = PhysicalType::Float;
        chunks[0].optional = chunks[1].optional = optional;
        std::vector<Sample> expected;
        for (std::int64_t size : page_sizes(rng, n, true)) {
          Page label, key;
          label.count = key.count = static_cast<std::int32_t>(size);
          if (optional) {
            label.levels = key.levels =
                encode_levels(static_cast<std::size_t>(size), Levels::Mixed, {});
          }
          for (std::int64_t i = 0; i < size; ++i) {
            Sample s;
            s.label = {static_cast<float>(rng() % 1000) / 8};
            s.slots = {{static_cast<std::int64_t>(rng())}};
            put(s.label[0], label.values);
            put(s.slots[0][0], key.values);
            expected.push_back(s);
          }
          chunks[0].pages.push_back(label);
          chunks[1].pages.push_back(key);
        }
        for (bool one_literal : {true, false}) {
          testing::ScratchDir dir;
          const FileSpec spec{Codec::Snappy, v2, one_literal};
          ASSERT_EQ(read(write_file(dir.path(), n, chunks, spec), DType::I64), expected)
              << (one_literal ? "one literal" : "two literals");
        }
      }
    }
  }
}

TEST(ParquetPages, KeysAtTheEdgesOfTheirRange) {
  const auto file_of = [](const fs::path& dir, const std::vector<std::int64_t>& keys) {
    std::vector<Chunk> chunks(2);
    chunks[0].type = PhysicalType::Float;
    Page label, key;
    label.count = key.count = static_cast<std::int32_t>(keys.size());
    for (std::int64_t k : keys) {
      put(0.0f, label.values);
      put(k, key.values);
    }
    chunks[0].pages.push_back(label);
    chunks[1].pages.push_back(key);
    return write_file(dir, static_cast<std::int64_t>(keys.size()), chunks, {});
  };
  const auto keys_read = [](const std::vector<Sample>& samples) {
    std::vector<std::int64_t> keys;
    for (const Sample& s : samples)
      keys.push_back(s.slots[0][0]);
    return keys;
  };
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kU32Max = std::numeric_limits<std::uint32_t>::max();
  testing::ScratchDir dir;
  // A vocabulary of 1000: 0 and 999 are keys, 1000 and -1 are not.
  EXPECT_EQ(keys_read(read(file_of(dir.path(), {0, 999, 500}), DType::U32, {1000})),
            (std::vector<std::int64_t>{0, 999, 500}));
  EMBER_EXPECT_THROW_WITH(read(file_of(dir.path(), {0, 999, 1000}), DType::U32, {1000}), DataError,
                          "row 2 holds key 1000, outside slot_size_array[0] = 1000");
  EMBER_EXPECT_THROW_WITH(read(file_of(dir.path(), {0, -1}), DType::I64, {1000}), DataError,
                          "row 1 holds key -1, outside slot_size_array[0] = 1000");
  // u32 keys without a vocabulary: 0 to 2^32 - 1.
  EXPECT_EQ(keys_read(read(file_of(dir.path(), {kU32Max, 0}), DType::U32)),
            (std::vector<std::int64_t>{kU32Max, 0}));
  EMBER_EXPECT_THROW_WITH(read(file_of(dir.path(), {kU32Max + 1}), DType::U32), DataError,
                          "row 0 holds key 4294967296, outside u32 (I32) keys");
  EMBER_EXPECT_THROW_WITH(read(file_of(dir.path(), {5, -1}), DType::U32), DataError,
                          "row 1 holds key -1, outside u32 (I32) keys");
  // i64 keys without a vocabulary: every value.
  EXPECT_EQ(keys_read(read(file_of(dir.path(), {kMin, kMax, -1, 0}), DType::I64)),
            (std::vector<std::int64_t>{kMin, kMax, -1, 0}));
}

}  // namespace
}  // namespace ember::data
