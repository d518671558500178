// `ember datagen --format parquet` and `ember convert criteo --format parquet`: the same samples
// as their Norm output (Parquet stores per-slot ids; slot_size_array gives the offsets Norm's
// keys carry), HugeCTR's folder layout, every codec.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/data_test_support.hpp"
#include "data/parquet_test_support.hpp"
#include "ember/data/criteo.hpp"
#include "ember/data/datagen.hpp"
#include "ember/data/parquet/hugectr_metadata.hpp"
#include "ember/data/parquet/parquet_file.hpp"
#include "ember/data/pipeline.hpp"
#include "support/test_support.hpp"

namespace ember::data {
namespace {

namespace fs = std::filesystem;

TEST(ParquetWriters, DatagenWritesTheSameSamplesAsNorm) {
  EMBER_REQUIRE_CODEC(parquet::Codec::Snappy);
  EMBER_REQUIRE_CODEC(parquet::Codec::Zstd);
  for (const bool multi_hot : {false, true}) {
    testing::ScratchDir dir;
    DatagenOptions o;
    o.samples = 2500;
    o.eval_samples = 700;
    o.files = 3;
    o.eval_files = 2;
    o.slots_per_input = {4, 3};
    o.dense_dim = 5;
    o.vocabulary = {50, 60, 70, 80, 90, 100, 110};
    o.nnz_min = multi_hot ? 0 : 1;
    o.nnz_max = multi_hot ? 3 : 1;
    o.threads = 2;
    o.out_dir = (dir / "norm").string();
    const DatasetDescription norm = generate_dataset(o);
    o.out_dir = (dir / "parquet").string();
    o.format = DataFormat::Parquet;
    o.compression = multi_hot ? parquet::Codec::Zstd : parquet::Codec::Snappy;
    const DatasetDescription pq = generate_dataset(o);

    EXPECT_EQ(pq.train.file_list, (dir / "parquet" / "train" / "_file_list.txt").string());
    EXPECT_TRUE(fs::exists(dir / "parquet" / "eval" / "_metadata.json"));
    const auto meta =
        parquet::read_hugectr_metadata((dir / "parquet" / "train" / "_metadata.json").string());
    ASSERT_EQ(meta.file_stats.size(), 3u);
    EXPECT_EQ(meta.file_stats[0].file_name, "part_0.parquet");
    EXPECT_EQ(meta.cats.size(), 7u);
    const DataConfig c = pq.data_config();
    EXPECT_EQ(c.format, DataFormat::Parquet);
    EXPECT_EQ(c.slot_size_array, o.vocabulary);
    EXPECT_EQ(pq.extra.at("teacher_auc"), norm.extra.at("teacher_auc"));
    for (DType key : {DType::U32, DType::I64}) {
      for (DataSplit split : {DataSplit::Train, DataSplit::Eval}) {
        const auto want = datatest::read_split(norm, split, norm.key_type);  // Norm: as written
        EXPECT_EQ(want.size(), split == DataSplit::Train ? 2500u : 700u);
        EXPECT_EQ(datatest::read_split(pq, split, key), want)
            << (multi_hot ? "multi-hot" : "one-hot");
      }
    }
  }
}

TEST(ParquetWriters, ConvertCriteoWritesTheSameSamplesAsNorm) {
  EMBER_REQUIRE_SHARED_DATA(shared);
  for (auto codec : {parquet::Codec::Uncompressed, parquet::Codec::Snappy, parquet::Codec::Zstd}) {
    if (!parquet::codec_supported(codec)) continue;  // not in this build
    testing::ScratchDir dir;
    CriteoConvertOptions o;
    o.inputs = {(shared / "criteo_sample.tsv").string()};
    o.progress = false;
    o.eval_fraction = 0.25;
    o.samples_per_file = 60;
    o.out_dir = (dir / "norm").string();
    const auto norm = convert_criteo(o);
    o.out_dir = (dir / "parquet").string();
    o.format = DataFormat::Parquet;
    o.compression = codec;
    const auto pq = convert_criteo(o);
    EXPECT_EQ(pq.description.train.files.size(), 3u);  // 150 training lines, 60 per file
    const parquet::ParquetFile f(pq.description.train.files[0]);
    EXPECT_EQ(f.metadata().row_groups[0].columns[0].meta_data->codec, codec);
    for (DataSplit split : {DataSplit::Train, DataSplit::Eval}) {
      const auto want = datatest::read_split(norm.description, split, DType::U32);
      EXPECT_EQ(want.size(), split == DataSplit::Train ? 150u : 50u);
      EXPECT_EQ(datatest::read_split(pq.description, split, DType::U32), want);
    }
  }
}

}  // namespace
}  // namespace ember::data
