// save_safetensors / load_safetensors: round trips of every dtype and odd shape, the exact
// byte layout of a small file, and what a successful save leaves on disk.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/io/safetensors.h"
#include "io_test_util.h"

using namespace tandem;
using tandem::test::read_bytes;
using tandem::test::ScratchDir;
using tandem::test::tensor_bytes;
using tandem::test::tensor_from_bits;

namespace {

// Saves, loads, and checks names, order, dtypes, shapes and bit-exact contents.
io::SafetensorsContent round_trip(const ScratchDir& dir, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata = {}) {
  const std::string path = dir.file("t.safetensors");
  io::save_safetensors(path, tensors, metadata);
  io::SafetensorsContent loaded = io::load_safetensors(path);
  EXPECT_EQ(loaded.tensors.size(), tensors.size());
  for (size_t i = 0; i < std::min(loaded.tensors.size(), tensors.size()); ++i) {
    const auto& [name, want] = tensors[i];
    const auto& [got_name, got] = loaded.tensors[i];
    EXPECT_EQ(got_name, name) << "order must be kept";
    EXPECT_EQ(got.dtype(), want.dtype()) << name;
    EXPECT_EQ(got.shape(), want.shape()) << name;
    EXPECT_TRUE(got.device().is_cpu());
    // TensorView::is_contiguous calls a fresh [2, 0] tensor non-contiguous (its strides skip
    // zero sizes); empty tensors have no layout to check.
    if (want.numel() > 0) EXPECT_TRUE(got.is_contiguous()) << name;
    EXPECT_EQ(tensor_bytes(got), tensor_bytes(want)) << name;
  }
  return loaded;
}

}  // namespace

TEST(Safetensors, RoundTripsEveryDtypeBitExactly) {
  ScratchDir dir;
  const float inf = std::numeric_limits<float>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  round_trip(dir, {
      {"f32", Tensor::from_vector<float>({1.5f, -0.0f, inf, -inf, 1e-45f, std::nanf("7")}, {2, 3})},
      {"f64", Tensor::from_vector<double>({3.141592653589793, nan, -1e308, 5e-324}, {4})},
      // float16: 1.0, -0, +inf, a NaN with payload, the smallest subnormal, 65504 (max)
      {"f16", tensor_from_bits({0x3c00, 0x8000, 0x7c00, 0x7e01, 0x0001, 0x7bff}, DType::Float16)},
      // bfloat16: 1.0, -2.0, +inf, a NaN with payload, the smallest subnormal
      {"bf16", tensor_from_bits({0x3f80, 0xc000, 0x7f80, 0x7fc1, 0x0001}, DType::BFloat16)},
      {"i32", Tensor::from_vector<int32_t>({INT32_MIN, -1, 0, INT32_MAX}, {2, 2})},
      {"i64", Tensor::from_vector<int64_t>({INT64_MIN, 42, INT64_MAX}, {3})},
      {"u8", Tensor::from_vector<uint8_t>({0, 1, 127, 255}, {4, 1})},
      {"bool", Tensor::from_vector<bool>({true, false, false, true, true}, {5})},
  });
}

TEST(Safetensors, RoundTripsScalarsAndEmptyTensors) {
  ScratchDir dir;
  auto loaded = round_trip(dir, {
      {"scalar", Tensor::scalar(2.5)},
      {"empty_rows", Tensor::zeros({0, 3})},
      {"step", Tensor::scalar(7, DType::Int64)},
      {"empty_cols", Tensor::zeros({2, 0}, DType::Float64)},
      {"empty_1d", Tensor::zeros({0}, DType::Bool)},
  });
  EXPECT_EQ(loaded.tensors[0].second.dim(), 0);
  EXPECT_DOUBLE_EQ(loaded.tensors[0].second.item(), 2.5);
  EXPECT_EQ(loaded.tensors[2].second.item(), 7.0);
}

TEST(Safetensors, NoTensorsAtAllIsAValidFile) {
  ScratchDir dir;
  auto loaded = round_trip(dir, {}, {{"k", "v"}});
  EXPECT_EQ(loaded.metadata.at("k"), "v");
}

TEST(Safetensors, WritesNonContiguousInputsInLogicalOrder) {
  ScratchDir dir;
  Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor transposed = base.t();                 // [3, 2]: 0 3 1 4 2 5
  Tensor strided = base.slice(1, 0, 3, 2);      // [2, 2]: 0 2 3 5
  Tensor broadcast = Tensor::from_vector<float>({9, 8}, {2, 1}).expand({2, 3});  // stride 0
  Tensor offset_view = base.select(0, 1);       // [3]: 3 4 5, storage offset 3
  ASSERT_FALSE(transposed.is_contiguous());
  ASSERT_FALSE(strided.is_contiguous());
  auto loaded = round_trip(dir, {{"t", transposed}, {"s", strided}, {"b", broadcast}, {"o", offset_view}});
  EXPECT_EQ(loaded.tensors[0].second.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(loaded.tensors[1].second.to_vector<float>(), (std::vector<float>{0, 2, 3, 5}));
  EXPECT_EQ(loaded.tensors[2].second.to_vector<float>(), (std::vector<float>{9, 9, 9, 8, 8, 8}));
  EXPECT_EQ(loaded.tensors[3].second.to_vector<float>(), (std::vector<float>{3, 4, 5}));
}

TEST(Safetensors, ParametersThatRequireGradAreSavedAsPlainData) {
  ScratchDir dir;
  Tensor w = Tensor::from_vector<float>({1, 2}, {2});
  w.requires_grad_();
  auto loaded = round_trip(dir, {{"w", w}});
  EXPECT_FALSE(loaded.tensors[0].second.requires_grad());
}

TEST(Safetensors, KeepsMetadataAndAddsTheChecksum) {
  ScratchDir dir;
  auto loaded = round_trip(dir, {{"x", Tensor::ones({3})}}, {{"format", "pt"}, {"json", R"({"a": [1, 2]})"}});
  EXPECT_EQ(loaded.metadata.at("format"), "pt");
  EXPECT_EQ(loaded.metadata.at("json"), R"({"a": [1, 2]})");
  ASSERT_TRUE(loaded.metadata.count(io::kFileChecksumKey));
  EXPECT_EQ(loaded.metadata.at(io::kFileChecksumKey).size(), 8u);
}

// The whole file of a tiny example, byte by byte, against the format's definition.
TEST(Safetensors, ByteLayoutMatchesTheFormat) {
  ScratchDir dir;
  const std::string path = dir.file("tiny.safetensors");
  io::save_safetensors(path, {{"a", Tensor::from_vector<float>({1.0f, 2.0f}, {2})},
                              {"b", Tensor::from_vector<uint8_t>({7, 8, 9}, {3})}},
                       {{"note", "hi"}});
  // The checksum: Python's zlib.crc32 of these 187 bytes with "b7a8aae3" written as "00000000".
  const std::string json =
      R"({"__metadata__":{"note":"hi","tandem.file_crc32":"b7a8aae3"},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})";
  ASSERT_EQ(json.size(), 167u);
  // 8 + 167 is not a multiple of 8: one space pads the header to 168 bytes.
  std::vector<uint8_t> expected = {168, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), json.begin(), json.end());
  expected.insert(expected.end(), {' '});
  expected.insert(expected.end(), {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 7, 8, 9});
  EXPECT_EQ(read_bytes(path), expected);
  EXPECT_EQ(read_bytes(path).size(), 187u);
}

TEST(Safetensors, DataSectionIsAlwaysEightByteAligned) {
  ScratchDir dir;
  const std::string path = dir.file("a.safetensors");
  for (int name_length = 1; name_length <= 9; ++name_length) {
    io::save_safetensors(path, {{std::string(size_t(name_length), 'w'), Tensor::ones({1})}});
    auto bytes = read_bytes(path);
    uint64_t header_size = 0;
    for (int b = 7; b >= 0; --b) header_size = (header_size << 8) | bytes[size_t(b)];
    EXPECT_EQ((8 + header_size) % 8, 0u) << name_length;
    EXPECT_EQ(bytes.size(), 8 + header_size + 4);
  }
}

TEST(Safetensors, OverwritesAndLeavesNoTemporaryFile) {
  ScratchDir dir;
  const std::string path = dir.file("w.safetensors");
  io::save_safetensors(path, {{"x", Tensor::ones({2})}});
  io::save_safetensors(path, {{"y", Tensor::zeros({3}, DType::Int32)}});
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"w.safetensors"});
  auto loaded = io::load_safetensors(path);
  ASSERT_EQ(loaded.tensors.size(), 1u);
  EXPECT_EQ(loaded.tensors[0].first, "y");
}

TEST(Safetensors, ReadsFilesWithoutMetadataOrChecksum) {
  // As another writer may produce them: no "__metadata__", entries in any order in the JSON.
  ScratchDir dir;
  const std::string path = dir.file("plain.safetensors");
  std::string header = R"({"z":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})";
  tandem::test::write_bytes(path, tandem::test::safetensors_bytes(header, {5, 0, 0, 0, 1, 2}));
  auto loaded = io::load_safetensors(path);
  EXPECT_TRUE(loaded.metadata.empty());
  ASSERT_EQ(loaded.tensors.size(), 2u);
  EXPECT_EQ(loaded.tensors[0].first, "z");  // file (offset) order, not alphabetical
  EXPECT_EQ(loaded.tensors[0].second.to_vector<int32_t>(), std::vector<int32_t>{5});
  EXPECT_EQ(loaded.tensors[1].second.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2}));
}
