// Every way a safetensors file can be broken gives a DataError that names the file and says
// what is wrong; a save that fails leaves the previous file as it was and no temporary file.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>

#include "base/error.h"
#include "engine/io/safetensors.h"
#include "io_test_util.h"

using namespace tandem;
using tandem::test::expect_error;
using tandem::test::read_bytes;
using tandem::test::safetensors_bytes;
using tandem::test::ScratchDir;
using tandem::test::write_bytes;

namespace {

// A hand-made file: "w" F32 [4] at [0, 16), "b" I64 [2] at [16, 32).
const std::string kGoodHeader =
    R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"I64","shape":[2],"data_offsets":[16,32]}})";
std::vector<uint8_t> good_data() {
  std::vector<uint8_t> d(32);
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i * 7);
  return d;
}

// Writes bytes to a file and expects load_safetensors to reject it, naming the file.
void expect_rejected(const ScratchDir& dir, const std::vector<uint8_t>& bytes, std::initializer_list<std::string> fragments) {
  const std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  std::string msg = expect_error<DataError>([&] { io::load_safetensors(path); }, fragments);
  EXPECT_NE(msg.find(path), std::string::npos) << "the error must name the file: " << msg;
}

void expect_header_rejected(const ScratchDir& dir, const std::string& header, std::initializer_list<std::string> fragments) {
  expect_rejected(dir, safetensors_bytes(header, good_data()), fragments);
}

}  // namespace

TEST(SafetensorsErrors, TheHandMadeBaseFileIsValid) {
  ScratchDir dir;
  write_bytes(dir.file("good.safetensors"), safetensors_bytes(kGoodHeader, good_data()));
  auto loaded = io::load_safetensors(dir.file("good.safetensors"));
  EXPECT_EQ(loaded.tensors.size(), 2u);
}

TEST(SafetensorsErrors, TruncatedAtEveryStage) {
  ScratchDir dir;
  const std::string saved = dir.file("saved.safetensors");
  io::save_safetensors(saved, {{"w", Tensor::ones({4})}, {"b", Tensor::zeros({2}, DType::Int64)}});
  const std::vector<uint8_t> whole = read_bytes(saved);
  const size_t data_start = whole.size() - 32;
  // Inside the length prefix, right after it, inside the header, at the data's start,
  // inside the first tensor, and one byte short of the end.
  for (size_t keep : {size_t(0), size_t(3), size_t(8), size_t(20), data_start, data_start + 5, whole.size() - 1}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " of " + std::to_string(whole.size()) + " bytes");
    expect_rejected(dir, std::vector<uint8_t>(whole.begin(), whole.begin() + long(keep)), {"truncated"});
  }
  // The message for a cut in the data section gives both sizes.
  expect_rejected(dir, std::vector<uint8_t>(whole.begin(), whole.begin() + long(data_start + 5)),
                  {"the header says 32 data bytes, the file has 5"});
}

TEST(SafetensorsErrors, HeaderLengthBeyondTheFile) {
  ScratchDir dir;
  auto bytes = safetensors_bytes(kGoodHeader, good_data());
  bytes[0] = 0x00;
  bytes[1] = 0x10;  // 4096
  expect_rejected(dir, bytes, {"truncated", "header length is 4096"});
  bytes[5] = 0x01;  // ~2^40: refused before any allocation
  expect_rejected(dir, bytes, {"more than the 100000000 allowed"});
}

TEST(SafetensorsErrors, InvalidJson) {
  ScratchDir dir;
  expect_header_rejected(dir, R"({"w":{"dtype":"F32",)", {"not valid JSON"});
  expect_header_rejected(dir, "not json at all", {"not valid JSON"});
  expect_header_rejected(dir, "[1, 2, 3]", {"must be a JSON object"});
}

TEST(SafetensorsErrors, UnknownDtypeNamesItAndTheSupportedOnes) {
  ScratchDir dir;
  expect_header_rejected(dir, R"({"w":{"dtype":"F8_E4M3","shape":[32],"data_offsets":[0,32]}})",
                         {"tensor 'w'", "\"F8_E4M3\"", "F32, F64, F16, BF16, I32, I64, U8, BOOL"});
  expect_header_rejected(dir, R"({"w":{"dtype":7,"shape":[32],"data_offsets":[0,32]}})", {"dtype must be a string"});
}

TEST(SafetensorsErrors, MalformedEntries) {
  ScratchDir dir;
  expect_header_rejected(dir, R"({"w":{"dtype":"U8","shape":[32]}})", {"tensor 'w'", "data_offsets"});
  expect_header_rejected(dir, R"({"w":{"dtype":"U8","shape":[-32],"data_offsets":[0,32]}})", {"non-negative"});
  expect_header_rejected(dir, R"({"w":{"dtype":"U8","shape":[32.5],"data_offsets":[0,32]}})", {"non-negative integer"});
  expect_header_rejected(dir, R"({"w":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,32],"data_offsets":[0,32]}})",
                         {"9 dims", "at most 8"});
  expect_header_rejected(dir, R"({"w":{"dtype":"U8","shape":[32],"data_offsets":[0]}})", {"[begin, end]"});
  expect_header_rejected(dir, R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[32,0]}})", {"end < begin"});
  // A shape whose byte count overflows 64 bits must not wrap around to a small size.
  expect_header_rejected(dir, R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,32]}})",
                         {"impossibly large shape"});
}

TEST(SafetensorsErrors, ShapeAndOffsetsDisagree) {
  ScratchDir dir;
  expect_header_rejected(dir, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,32]}})",
                         {"tensor 'w'", "needs 16 bytes", "span 32"});
}

TEST(SafetensorsErrors, OffsetsOutOfRange) {
  ScratchDir dir;
  expect_header_rejected(dir, R"({"w":{"dtype":"U8","shape":[4096],"data_offsets":[0,4096]}})",
                         {"truncated: the header says 4096 data bytes, the file has 32", "tensor 'w'", "past the end"});
  expect_header_rejected(dir, R"({"w":{"dtype":"U8","shape":[16],"data_offsets":[100,116]}})",
                         {"belong to no tensor", "'w'"});
}

TEST(SafetensorsErrors, OverlappingOrGappedOrUncoveredData) {
  ScratchDir dir;
  expect_header_rejected(
      dir, R"({"a":{"dtype":"U8","shape":[20],"data_offsets":[0,20]},"b":{"dtype":"U8","shape":[16],"data_offsets":[16,32]}})",
      {"'a' at [0, 20]", "'b' at [16, 32]", "overlap"});
  expect_header_rejected(
      dir, R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[16],"data_offsets":[16,32]}})",
      {"data bytes [8, 16] belong to no tensor"});
  expect_header_rejected(dir, R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                         {"says 8 data bytes but the file has 32", "24 unexpected bytes"});
}

TEST(SafetensorsErrors, MetadataMustMapStringsToStrings) {
  ScratchDir dir;
  expect_header_rejected(dir, R"({"__metadata__":{"epoch":3},"w":{"dtype":"U8","shape":[32],"data_offsets":[0,32]}})",
                         {"metadata \"epoch\" must be a string"});
  expect_header_rejected(dir, R"({"__metadata__":[1],"w":{"dtype":"U8","shape":[32],"data_offsets":[0,32]}})",
                         {"\"__metadata__\" must be an object"});
}

TEST(SafetensorsErrors, FlippedDataByteFailsTheChecksum) {
  ScratchDir dir;
  const std::string saved = dir.file("saved.safetensors");
  io::save_safetensors(saved, {{"w", Tensor::arange(100, DType::Float32)}});
  auto bytes = read_bytes(saved);
  bytes[bytes.size() - 50] ^= 0x01;  // one bit, in the middle of the data
  expect_rejected(dir, bytes, {"checksum mismatch", "CRC-32"});
  // A corrupted checksum value is caught the same way.
  bytes = read_bytes(saved);
  std::string text(bytes.begin(), bytes.end());
  size_t at = text.find("\"tandem.file_crc32\":\"") + 21;
  bytes[at] = bytes[at] == 'a' ? 'b' : 'a';
  expect_rejected(dir, bytes, {"checksum mismatch"});
}

// The checksum covers the whole file: every byte of the prefix, the header (names, dtypes,
// shapes, metadata strings, padding) and the data, changed in any bit, is an error naming the
// file (changing a dtype "F32" to "I32" or a metadata digit keeps a valid file otherwise),
// except a bit of the checksum's own key: that file reads as one without a checksum, which
// plain safetensors files are; checkpoints refuse it (test_checkpoint.cpp).
TEST(SafetensorsErrors, EveryFlippedBitAnywhereIsAnError) {
  ScratchDir dir;
  const std::string saved = dir.file("saved.safetensors");
  io::save_safetensors(saved, {{"w", Tensor::arange(6, DType::Float32)}, {"n", Tensor::arange(2, DType::Int64)}},
                       {{"settings", R"({"betas":[0.9,0.999]})"}});
  const auto good = read_bytes(saved);
  const std::string path = dir.file("bad.safetensors");
  for (size_t i = 0; i < good.size(); ++i) {
    const uint8_t bit = uint8_t(1u << (i % 8));  // each bit position, over the file
    auto bytes = good;
    bytes[i] ^= bit;
    write_bytes(path, bytes);
    try {
      const io::SafetensorsContent loaded = io::load_safetensors(path);
      EXPECT_FALSE(loaded.metadata.count(io::kFileChecksumKey))
          << "byte " << i << " xor " << int(bit) << " loaded without an error";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// Files written before the whole-file checksum carry the data section's CRC-32
// ("tandem.checksum"): still verified.
TEST(SafetensorsErrors, OlderDataChecksumIsStillVerified) {
  ScratchDir dir;
  // 4 bytes 01 02 03 04; Python: '%08x' % zlib.crc32(bytes([1, 2, 3, 4])) == "b63cfbcd".
  const std::string header =
      R"({"__metadata__":{"tandem.checksum":"b63cfbcd"},"u":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  const std::string path = dir.file("old.safetensors");
  write_bytes(path, safetensors_bytes(header, {1, 2, 3, 4}));
  EXPECT_EQ(io::load_safetensors(path).tensors.at(0).second.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2, 3, 4}));
  expect_rejected(dir, safetensors_bytes(header, {1, 2, 3, 5}), {"checksum mismatch", "data section's CRC-32"});
}

TEST(SafetensorsErrors, MissingFileAndDirectoryAreDataErrors) {
  ScratchDir dir;
  expect_error<DataError>([&] { io::load_safetensors(dir.file("nope.safetensors")); },
                          {dir.file("nope.safetensors"), "No such file or directory"});
  expect_error<DataError>([&] { io::load_safetensors(dir.path()); }, {dir.path(), "not a regular file"});
}

// ---- saving ----

TEST(SafetensorsSave, BadNamesAreRejectedBeforeAnythingIsWritten) {
  ScratchDir dir;
  const std::string path = dir.file("x.safetensors");
  expect_error<ValueError>([&] { io::save_safetensors(path, {{"a", Tensor::ones({1})}, {"a", Tensor::ones({1})}}); },
                           {"'a'", "twice"});
  expect_error<ValueError>([&] { io::save_safetensors(path, {{"", Tensor::ones({1})}}); }, {"empty name"});
  expect_error<ValueError>([&] { io::save_safetensors(path, {{"__metadata__", Tensor::ones({1})}}); }, {"reserved"});
  expect_error<ValueError>([&] { io::save_safetensors(path, {{"u", Tensor()}}); }, {"'u'", "undefined"});
  EXPECT_TRUE(dir.listing().empty());
}

TEST(SafetensorsSave, MissingDirectoryIsADataErrorNamingThePath) {
  ScratchDir dir;
  const std::string path = dir.file("no/such/dir/x.safetensors");
  expect_error<DataError>([&] { io::save_safetensors(path, {{"a", Tensor::ones({1})}}); },
                          {path, "No such file or directory", "exists and is writable"});
  EXPECT_TRUE(dir.listing().empty());
}

TEST(SafetensorsSave, PathThatIsADirectoryIsLeftAloneAndNoTempFileRemains) {
  ScratchDir dir;
  const std::string path = dir.file("ckpt");
  std::filesystem::create_directory(path);
  write_bytes(path + "/keep.txt", {1, 2, 3});
  expect_error<DataError>([&] { io::save_safetensors(path, {{"a", Tensor::ones({1})}}); }, {path, "renaming"});
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"ckpt"});
  EXPECT_EQ(read_bytes(path + "/keep.txt"), (std::vector<uint8_t>{1, 2, 3}));
}

// A write that fails halfway (here: the file-size limit, standing in for a full disk) must
// leave the previous file byte for byte and remove the partial temporary file.
TEST(SafetensorsSave, FailedWriteKeepsThePreviousFileIntact) {
  ScratchDir dir;
  const std::string path = dir.file("last.safetensors");
  io::save_safetensors(path, {{"old", Tensor::ones({4})}});
  const auto before = read_bytes(path);

  struct rlimit saved_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  struct rlimit small = saved_limit;
  small.rlim_cur = 64 * 1024;
  auto saved_handler = std::signal(SIGXFSZ, SIG_IGN);  // so write() fails with EFBIG instead of killing us
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg;
  try {
    io::save_safetensors(path, {{"new", Tensor::ones({1 << 20})}});  // 4 MiB
  } catch (const DataError& e) {
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved_limit);
  std::signal(SIGXFSZ, saved_handler);

  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
  EXPECT_NE(msg.find("left as it was"), std::string::npos) << msg;
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"last.safetensors"});
  EXPECT_EQ(io::load_safetensors(path).tensors.at(0).first, "old");
}
