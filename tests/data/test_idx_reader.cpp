// read_idx: round trips of raw and gzipped files, and every malformed-file error with its message.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "data_test_util.h"
#include "engine/data/idx_reader.h"
#include "tests/accelerators/expect_error.h"

namespace tandem::data {
namespace {

using testing::idx_bytes;
using testing::TempDir;
using testing::write_bytes;

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(start + i * 7);
  return v;
}

class IdxRoundTrip : public ::testing::TestWithParam<bool> {};  // param: gzip

TEST_P(IdxRoundTrip, LabelsAndImagesReadBackExactly) {
  TempDir dir;
  const bool gzip = GetParam();
  const auto labels = iota_bytes(5, 1);
  const auto images = iota_bytes(3 * 2 * 4, 3);
  write_bytes(dir.file("labels"), idx_bytes(0x08, {5}, labels), gzip);
  write_bytes(dir.file("images"), idx_bytes(0x08, {3, 2, 4}, images), gzip);

  IdxArray l = read_idx(dir.file("labels"), 1);
  EXPECT_EQ(l.dims, (std::vector<int64_t>{5}));
  EXPECT_EQ(l.data, labels);
  EXPECT_EQ(l.numel(), 5);

  IdxArray im = read_idx(dir.file("images"), 3);
  EXPECT_EQ(im.dims, (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(im.data, images);
  // expected_ndims = 0 accepts either.
  EXPECT_EQ(read_idx(dir.file("images")).dims.size(), 3u);
}

TEST_P(IdxRoundTrip, LargePayloadCrossesReadChunks) {
  // Over the reader's 16 MiB first chunk, so the growing-buffer path runs.
  TempDir dir;
  std::vector<uint8_t> payload(1000 * 100 * 200);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i * 2654435761u >> 24);
  write_bytes(dir.file("big"), idx_bytes(0x08, {1000, 100, 200}, payload), GetParam());
  IdxArray a = read_idx(dir.file("big"), 3);
  ASSERT_EQ(a.data.size(), payload.size());
  EXPECT_TRUE(a.data == payload);
}

TEST_P(IdxRoundTrip, ZeroExamples) {
  TempDir dir;
  write_bytes(dir.file("empty"), idx_bytes(0x08, {0, 28, 28}, {}), GetParam());
  IdxArray a = read_idx(dir.file("empty"), 3);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{0, 28, 28}));
  EXPECT_TRUE(a.data.empty());
}

INSTANTIATE_TEST_SUITE_P(RawAndGzip, IdxRoundTrip, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "gzip" : "raw"; });

TEST(IdxErrors, MissingFile) {
  TempDir dir;
  expect_error<DataError>([&] { read_idx(dir.file("nope-idx1-ubyte")); },
                          {"not found", dir.file("nope-idx1-ubyte")});
}

TEST(IdxErrors, WrongMagicNamesFoundAndExpected) {
  TempDir dir;
  write_bytes(dir.file("bad"), {0x12, 0x34, 0x56, 0x78, 0, 0, 0, 1, 9}, false);
  expect_error<DataError>([&] { read_idx(dir.file("bad"), 3); },
                          {dir.file("bad"), "0x12345678", "expected 0x00000803", "not an IDX file"});
  // A label file read where images are expected: a valid magic, the wrong number of dims.
  write_bytes(dir.file("labels"), idx_bytes(0x08, {2}, {1, 2}), false);
  expect_error<DataError>([&] { read_idx(dir.file("labels"), 3); },
                          {dir.file("labels"), "has 1 dims", "0x00000801", "expected 3", "0x00000803"});
  write_bytes(dir.file("ndims0"), idx_bytes(0x08, {}, {}), false);
  expect_error<DataError>([&] { read_idx(dir.file("ndims0")); }, {"has 0 dims", "expected 1 to 4"});
}

TEST(IdxErrors, WrongDtypeByte) {
  TempDir dir;
  write_bytes(dir.file("floats"), idx_bytes(0x0D, {1}, {0, 0, 0, 0}), true);
  expect_error<DataError>([&] { read_idx(dir.file("floats"), 1); },
                          {dir.file("floats"), "float32", "0x0d", "only uint8", "0x08"});
}

TEST(IdxErrors, TruncatedHeader) {
  TempDir dir;
  write_bytes(dir.file("short"), {0, 0}, false);
  expect_error<DataError>([&] { read_idx(dir.file("short"), 1); },
                          {dir.file("short"), "truncated", "expected a 4-byte magic", "found only 2 bytes"});
  write_bytes(dir.file("empty"), {}, false);
  expect_error<DataError>([&] { read_idx(dir.file("empty"), 1); }, {"found only 0 bytes"});
  auto cut = idx_bytes(0x08, {3, 28, 28}, {});
  cut.resize(4 + 6);  // the magic and 1.5 of the 3 dims
  write_bytes(dir.file("cutdims"), cut, false);
  expect_error<DataError>([&] { read_idx(dir.file("cutdims"), 3); },
                          {dir.file("cutdims"), "truncated in its header", "3 dims (12 bytes)", "found 6 bytes"});
}

TEST(IdxErrors, TruncatedPayload) {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "trunc.gz" : "trunc");
    write_bytes(path, idx_bytes(0x08, {10}, iota_bytes(7)), gzip);
    expect_error<DataError>([&] { read_idx(path, 1); },
                            {path, "truncated", "dims [10] need 10 payload bytes, found 7"});
  }
}

TEST(IdxErrors, CutGzipStream) {
  // A download cut short: the compressed stream itself ends early.
  TempDir dir;
  std::vector<uint8_t> payload(20000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i * 2654435761u >> 24);
  write_bytes(dir.file("full.gz"), idx_bytes(0x08, {20000}, payload), true);
  const auto size = std::filesystem::file_size(dir.file("full.gz"));
  std::filesystem::copy_file(dir.file("full.gz"), dir.file("cut.gz"));
  std::filesystem::resize_file(dir.file("cut.gz"), size / 2);
  const std::string msg = expect_error<DataError>([&] { read_idx(dir.file("cut.gz"), 1); }, {dir.file("cut.gz")});
  EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("corrupt") != std::string::npos) << msg;
}

TEST(IdxErrors, TooManyBytes) {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "long.gz" : "long");
    write_bytes(path, idx_bytes(0x08, {2, 2}, iota_bytes(6)), gzip);
    expect_error<DataError>([&] { read_idx(path); },
                            {path, "2 bytes after its payload", "need 4 payload bytes, found 6"});
  }
}

TEST(IdxErrors, AbsurdDimsFailWithoutHugeAllocation) {
  TempDir dir;
  write_bytes(dir.file("huge"), idx_bytes(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {1, 2, 3}), false);
  expect_error<DataError>([&] { read_idx(dir.file("huge"), 3); }, {dir.file("huge"), "corrupt"});
  // Large but representable dims on a tiny file: the reader fails at the end of the data.
  write_bytes(dir.file("big"), idx_bytes(0x08, {100000, 100, 100}, {1, 2, 3}), false);
  expect_error<DataError>([&] { read_idx(dir.file("big"), 3); },
                          {"need 1000000000 payload bytes, found 3"});
}

}  // namespace
}  // namespace tandem::data
