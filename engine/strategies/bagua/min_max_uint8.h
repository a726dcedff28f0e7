// 8-bit gradient and weight compression with a min/max scale per block (Bagua's MinMaxUInt8).
//
// The input is split into blocks of `block` elements (the last one may be shorter). Each block
// is sent as its minimum and maximum (two float32, 8 bytes) followed by one byte per element:
// code = round((x - min) / scale) with scale = (max - min) / 255, decoded as min + code * scale
// (code 255 as max itself; the exact operations, in double, are at Backend::compress_min_max_uint8).
// A decoded element differs from the original by at most scale / 2 plus float32 rounding of
// the result; a block whose elements are all equal decodes exactly.
//
// Non-finite input: a block holding any NaN or +-inf is flagged (its min and max are written
// as NaN) and decodes to NaN in every element, so a gradient that overflowed stays non-finite
// after the exchange (the 16-mixed loss scaler then skips the step, as with a plain allreduce)
// and never turns into finite garbage.
//
// The packed form is a flat uint8 tensor of compressed_bytes(numel, block) bytes: the headers of
// all blocks first, then the codes (kernels/min_max_uint8_layout.h). Float32 and float64 inputs
// are accepted (float64 is compressed through float32). The work runs on the tensor's device
// (Backend::compress_min_max_uint8: kernels/cpu/compress_min_max_uint8_cpu.cpp, or its bit-identical CUDA twin
// kernels/cuda/compress_min_max_uint8_cuda.cu), so for a GPU tensor only the packed bytes ever
// need to leave the GPU.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace tandem::bagua {

// Elements per block when a caller does not choose (Bagua's default chunking is of this order).
constexpr int64_t kDefaultCompressionBlock = 1024;

// Bytes of the packed form of `numel` elements in blocks of `block`.
int64_t compressed_bytes(int64_t numel, int64_t block);

// Raw forms on host memory (the CPU backend): `out` holds compressed_bytes(n, block) bytes.
void compress_min_max_uint8(const float* values, int64_t n, int64_t block, uint8_t* out);
void decompress_min_max_uint8(const uint8_t* packed, int64_t n, int64_t block, float* out);

// Tensor forms. compress: any float32/float64 tensor -> uint8 [compressed_bytes] on its device.
// decompress: the packed tensor (on any device) back into `out` (numel elements, float32 or
// float64; written in place, decoded on out's device).
Tensor compress_min_max_uint8(const Tensor& values, int64_t block = kDefaultCompressionBlock);
void decompress_min_max_uint8(const Tensor& packed, const Tensor& out, int64_t block = kDefaultCompressionBlock);

}  // namespace tandem::bagua
