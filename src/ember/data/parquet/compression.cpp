#include "ember/data/parquet/compression.hpp"

#include <zlib.h>
#if EMBER_WITH_SNAPPY
#include <snappy-c.h>
#endif
#if EMBER_WITH_ZSTD
#include <zstd.h>
#endif

#include <cstring>

#include "ember/core/error.hpp"
#include "ember/data/parquet/snappy_decoder.hpp"

#ifndef EMBER_WITH_SNAPPY
#define EMBER_WITH_SNAPPY 0
#endif
#ifndef EMBER_WITH_ZSTD
#define EMBER_WITH_ZSTD 0
#endif

namespace ember::data::parquet {

bool codec_readable(Codec codec) {
  switch (codec) {
    case Codec::Uncompressed:
    case Codec::Gzip:
    case Codec::Snappy:
      return true;
    case Codec::Zstd:
      return EMBER_WITH_ZSTD == 1;
    default:
      return false;
  }
}

bool codec_supported(Codec codec) {
  if (codec == Codec::Snappy) return EMBER_WITH_SNAPPY == 1;
  return codec_readable(codec);
}

std::string codec_support_problem(Codec codec, bool writing) {
  if (writing ? codec_supported(codec) : codec_readable(codec)) return "";
  if (codec == Codec::Snappy || codec == Codec::Zstd) {
    return cat("compression ", to_string(codec), " is not in this build of Ember (",
               codec == Codec::Snappy ? "libsnappy-dev" : "libzstd-dev",
               " was not found when it was built: run scripts/install-deps and rebuild)");
  }
  return cat("compression ", to_string(codec),
             " is not supported (UNCOMPRESSED, SNAPPY, ZSTD and GZIP are)");
}

struct Decompressor::Contexts {
#if EMBER_WITH_ZSTD
  ZSTD_DCtx* zstd = nullptr;
  ~Contexts() {
    if (zstd != nullptr) ZSTD_freeDCtx(zstd);
  }
#endif
};

Decompressor::Decompressor() : contexts_(std::make_unique<Contexts>()) {}
Decompressor::~Decompressor() = default;

namespace {

[[noreturn]] void fail(Codec codec, const std::string& what, const std::string& problem) {
  EMBER_THROW_AS(DataError, what, ": ", to_string(codec), " data ", problem);
}

void inflate_gzip(const std::byte* src, std::size_t size, std::byte* dst, std::size_t expected,
                  const std::string& what) {
  z_stream z{};
  // 15 + 32: a zlib or a gzip stream, whichever the header says (writers differ).
  if (inflateInit2(&z, 15 + 32) != Z_OK) fail(Codec::Gzip, what, "(zlib would not start)");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(src));
  z.avail_in = static_cast<uInt>(size);
  z.next_out = reinterpret_cast<Bytef*>(dst);
  z.avail_out = static_cast<uInt>(expected);
  const int rc = inflate(&z, Z_FINISH);
  const std::size_t produced = expected - z.avail_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    fail(Codec::Gzip, what,
         rc == Z_BUF_ERROR && produced == expected
             ? cat("decompresses to more than the page's ", expected, " bytes")
             : cat("is corrupt (zlib error ", rc, ")"));
  }
  if (produced != expected) {
    fail(Codec::Gzip, what,
         cat("decompresses to ", produced, " bytes, the page header says ", expected));
  }
}

}  // namespace

void Decompressor::check_size(Codec codec, [[maybe_unused]] const std::byte* src, std::size_t size,
                              std::size_t expected, const std::string& what) {
  switch (codec) {
    case Codec::Snappy: {
      const auto length = snappy_declared_length(src, size);
      if (!length) fail(codec, what, "is corrupt (no valid length)");
      if (*length != expected) {
        fail(codec, what, cat("declares ", *length, " bytes, the page header says ", expected));
      }
      return;
    }
#if EMBER_WITH_ZSTD
    case Codec::Zstd: {
      const unsigned long long length = ZSTD_getFrameContentSize(src, size);
      if (length == ZSTD_CONTENTSIZE_ERROR) fail(codec, what, "is corrupt (no zstd frame)");
      if (length != ZSTD_CONTENTSIZE_UNKNOWN && length != expected) {
        fail(codec, what, cat("declares ", length, " bytes, the page header says ", expected));
      }
      if (length == ZSTD_CONTENTSIZE_UNKNOWN && expected / 32768 > size + 1024) {
        fail(codec, what, cat("of ", size, " bytes cannot hold the page header's ", expected));
      }
      return;
    }
#endif
    case Codec::Gzip:
      if (expected / 1032 > size + 1024) {
        fail(codec, what, cat("of ", size, " bytes cannot hold the page header's ", expected));
      }
      return;
    default:
      return;
  }
}

void Decompressor::decompress(Codec codec, const std::byte* src, std::size_t size, std::byte* dst,
                              std::size_t expected, const std::string& what) {
  switch (codec) {
    case Codec::Uncompressed:
      if (size != expected) {
        fail(codec, what, cat("has ", size, " bytes, the page header says ", expected));
      }
      std::memcpy(dst, src, size);
      return;
    case Codec::Snappy: {
      if (const char* problem = snappy_decode(src, size, dst, expected)) {
        const auto length = snappy_declared_length(src, size);
        if (length && *length != expected) {
          fail(codec, what,
               cat("decompresses to ", *length, " bytes, the page header says ", expected));
        }
        fail(codec, what, cat("is corrupt (it ", problem, ")"));
      }
      return;
    }
#if EMBER_WITH_ZSTD
    case Codec::Zstd: {
      if (contexts_->zstd == nullptr) contexts_->zstd = ZSTD_createDCtx();
      const std::size_t n = ZSTD_decompressDCtx(contexts_->zstd, dst, expected, src, size);
      if (ZSTD_isError(n)) fail(codec, what, cat("is corrupt (", ZSTD_getErrorName(n), ")"));
      if (n != expected) {
        fail(codec, what, cat("decompresses to ", n, " bytes, the page header says ", expected));
      }
      return;
    }
#endif
    case Codec::Gzip:
      inflate_gzip(src, size, dst, expected, what);
      return;
    default:
      break;
  }
  EMBER_THROW_AS(DataError, what, ": ", codec_support_problem(codec, false));
}

void compress(Codec codec, const std::byte* src, std::size_t size, std::vector<std::byte>& out) {
  const std::size_t at = out.size();
  switch (codec) {
    case Codec::Uncompressed:
      out.insert(out.end(), src, src + size);
      return;
#if EMBER_WITH_SNAPPY
    case Codec::Snappy: {
      std::size_t n = snappy_max_compressed_length(size);
      out.resize(at + n);
      if (snappy_compress(reinterpret_cast<const char*>(src), size,
                          reinterpret_cast<char*>(out.data() + at), &n) != SNAPPY_OK) {
        EMBER_THROW("snappy compression failed");
      }
      out.resize(at + n);
      return;
    }
#endif
#if EMBER_WITH_ZSTD
    case Codec::Zstd: {
      const std::size_t bound = ZSTD_compressBound(size);
      out.resize(at + bound);
      const std::size_t n = ZSTD_compress(out.data() + at, bound, src, size, 3);
      if (ZSTD_isError(n)) EMBER_THROW("zstd compression failed: ", ZSTD_getErrorName(n));
      out.resize(at + n);
      return;
    }
#endif
    case Codec::Gzip: {
      z_stream z{};
      if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
          Z_OK) {
        EMBER_THROW("gzip compression would not start");
      }
      const std::size_t bound = deflateBound(&z, static_cast<uLong>(size));
      out.resize(at + bound);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(src));
      z.avail_in = static_cast<uInt>(size);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + at);
      z.avail_out = static_cast<uInt>(bound);
      const int rc = deflate(&z, Z_FINISH);
      const std::size_t n = bound - z.avail_out;
      deflateEnd(&z);
      if (rc != Z_STREAM_END) EMBER_THROW("gzip compression failed (zlib error ", rc, ")");
      out.resize(at + n);
      return;
    }
    default:
      EMBER_THROW_AS(ConfigError, "Parquet writer: ", codec_support_problem(codec));
  }
}

}  // namespace ember::data::parquet
