// CudaBackend::copy_strided: out[i...] = cast(src[i...]) for any pair of the eight dtypes and
// any strides (src may broadcast with stride 0). This is what .contiguous(), clone(), copy_(),
// casts and Tensor::to(dtype) run on the GPU.
//
// Same dtype: a contiguous pair is one cudaMemcpyAsync; otherwise the bytes move as 1/2/4/8-byte
// words through the strided map (elementwise_map.cuh). Different dtypes: one templated functor
// per (source, destination) pair, converting exactly as the CPU reference does
// (kernels/cpu/elementwise_copy_cpu.cpp: through double, or float for sources no wider than float, with
// round-to-nearest-even into float16/bfloat16), so GPU and CPU casts agree bit for bit,
// NaN payloads and the x86 results for out-of-range float-to-integer conversions included.
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/elementwise_map.cuh"

namespace tandem {

namespace {

using cuda::elementwise::load_pack;
using cuda::elementwise::pack_width;
using cuda::elementwise::store_pack;

// Device storage of each dtype; float16/bfloat16 stay raw bits so conversions can match the
// CPU's bit manipulations (base/dtype.cpp).
template <DType D> struct StorageOf;
template <> struct StorageOf<DType::Float32> { using type = float; };
template <> struct StorageOf<DType::Float64> { using type = double; };
template <> struct StorageOf<DType::Float16> { using type = uint16_t; };
template <> struct StorageOf<DType::BFloat16> { using type = uint16_t; };
template <> struct StorageOf<DType::Int32> { using type = int32_t; };
template <> struct StorageOf<DType::Int64> { using type = int64_t; };
template <> struct StorageOf<DType::UInt8> { using type = uint8_t; };
template <> struct StorageOf<DType::Bool> { using type = uint8_t; };
template <DType D> using storage_t = typename StorageOf<D>::type;

// ---------------------------------------------------------------- conversions as the CPU does them

// x86 float<->double conversions keep a NaN's sign and payload (quieting it); the GPU's cvt may
// return a canonical NaN instead, so NaNs are rebuilt from bits. Finite values and infinities
// convert with round-to-nearest-even on both.
__device__ __forceinline__ float double_to_float(double v) {
  if (v != v) {
    const uint64_t u = static_cast<uint64_t>(__double_as_longlong(v));
    const uint32_t sign = uint32_t(u >> 32) & 0x80000000u;
    return __uint_as_float(sign | 0x7fc00000u | uint32_t((u >> 29) & 0x7fffffu));
  }
  return static_cast<float>(v);  // cvt.rn.f32.f64
}
__device__ __forceinline__ double float_to_double(float v) {
  if (v != v) {
    const uint32_t u = __float_as_uint(v);
    const uint64_t bits = uint64_t(u & 0x80000000u) << 32 | 0x7ff8000000000000ull | uint64_t(u & 0x7fffffu) << 29;
    return __longlong_as_double(static_cast<long long>(bits));
  }
  return static_cast<double>(v);
}

// The CPU widens every source to double, which quiets a signaling NaN (sets the top mantissa
// bit); half types converted to float here do the same so float16/bfloat16 -> float32 agree.
// binary16 bits -> float: exact; NaNs keep sign and payload (half_to_float in dtype.cpp).
__device__ __forceinline__ float half_bits_to_float(uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0)
    return __uint_as_float(uint32_t(h & 0x8000u) << 16 | 0x7fc00000u | uint32_t(h & 0x3ffu) << 13);
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float bf16_bits_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
  return __uint_as_float(u);
}
// float -> binary16 bits, round to nearest even (cvt.rn.f16.f32 is IEEE rounding, subnormals
// included); NaN -> sign | 0x7e00 as float_to_half does.
__device__ __forceinline__ uint16_t float_to_half_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7e00u);
  return __half_as_ushort(__float2half_rn(f));
}
// float -> bfloat16 bits: the CPU's integer rounding (dtype.h float_to_bf16), verbatim in
// effect, so subnormals and NaN payloads match whatever the hardware's flush settings are.
__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// C++ truncation toward zero; NaN and out-of-range values give the minimum integer, which is what
// the CPU reference's cvttsd2si returns on x86 (the GPU's cvt would saturate instead).
__device__ __forceinline__ int64_t double_to_int64(double v) {
  return (v >= -9223372036854775808.0 && v < 9223372036854775808.0) ? static_cast<int64_t>(v) : INT64_MIN;
}
__device__ __forceinline__ int32_t double_to_int32(double v) {
  return (v > -2147483649.0 && v < 2147483648.0) ? static_cast<int32_t>(v) : INT32_MIN;
}

// The value the CPU's load_as_double produces, held as float where that is exact (float,
// float16 and bfloat16 sources) and as double otherwise.
template <DType S>
__device__ __forceinline__ auto source_value(storage_t<S> v) {
  if constexpr (S == DType::Float32 || S == DType::Float64) return v;
  else if constexpr (S == DType::Float16) return half_bits_to_float(v);
  else if constexpr (S == DType::BFloat16) return bf16_bits_to_float(v);
  else if constexpr (S == DType::Bool) return v != 0 ? 1.0 : 0.0;
  else return static_cast<double>(v);  // int32, int64 (round to nearest), uint8
}

// store_double of the CPU reference, for a float or double value.
template <DType D, typename V>
__device__ __forceinline__ storage_t<D> destination_value(V v) {
  constexpr bool is_double = std::is_same_v<V, double>;
  if constexpr (D == DType::Float32) {
    if constexpr (is_double) return double_to_float(v); else return v;
  } else if constexpr (D == DType::Float64) {
    if constexpr (is_double) return v; else return float_to_double(v);
  } else if constexpr (D == DType::Float16 || D == DType::BFloat16) {
    float f;
    if constexpr (is_double) f = double_to_float(v); else f = v;
    if constexpr (D == DType::Float16) return float_to_half_bits(f); else return float_to_bf16_bits(f);
  } else if constexpr (D == DType::Bool) {
    return uint8_t(v != V(0));
  } else if constexpr (D == DType::Int32) {
    return double_to_int32(double(v));
  } else if constexpr (D == DType::Int64) {
    return double_to_int64(double(v));
  } else {  // uint8: uint8_t(int64_t(v)), wrapping modulo 256
    return static_cast<uint8_t>(double_to_int64(double(v)));
  }
}

template <DType S, DType D>
__device__ __forceinline__ storage_t<D> cast_value(storage_t<S> v) {
  if constexpr (S == DType::Int64 && D == DType::Int32) {
    return static_cast<int32_t>(v);  // exact truncation, no detour through double (as the CPU)
  } else {
    return destination_value<D>(source_value<S>(v));
  }
}

// ---------------------------------------------------------------- functors for the strided map

constexpr int widest(int a, int b) { return a > b ? a : b; }

template <DType S, DType D>
struct CastFn {
  using src_t = storage_t<S>;
  using dst_t = storage_t<D>;
  static constexpr int kVec = pack_width(widest(int(sizeof(src_t)), int(sizeof(dst_t))));
  const src_t* src;
  dst_t* dst;
  template <int N>
  __device__ __forceinline__ void apply(const int64_t (&off)[2], const uint8_t (&mode)[2]) const {
    src_t s[N];
    load_pack<N>(src + off[0], mode[0], s);
    dst_t d[N];
#pragma unroll
    for (int j = 0; j < N; ++j) d[j] = cast_value<S, D>(s[j]);
    store_pack<N>(dst + off[1], d);
  }
};

// Same-dtype strided copy of raw words.
template <typename Word>
struct CopyFn {
  static constexpr int kVec = pack_width(int(sizeof(Word)));
  const Word* src;
  Word* dst;
  template <int N>
  __device__ __forceinline__ void apply(const int64_t (&off)[2], const uint8_t (&mode)[2]) const {
    Word w[N];
    load_pack<N>(src + off[0], mode[0], w);
    store_pack<N>(dst + off[1], w);
  }
};

template <typename Fn>
void run_copy(const Fn& fn, const TensorView& src, const TensorView& out, int src_bytes, int dst_bytes) {
  const cuda::StridedIndexer<2> ix(out.shape, {&src.strides, &out.strides});
  const auto plan = cuda::elementwise::plan_vectorized<2>(ix, {src.data, out.data}, {src_bytes, dst_bytes}, Fn::kVec);
  cuda::elementwise::launch_strided_map(fn, ix, out.numel(), plan, "copy_strided launch");
}

// Runs body(std::integral_constant<DType, D>{}) for the runtime dtype d.
template <typename F>
void dispatch_dtype(DType d, F&& body) {
  switch (d) {
    case DType::Float32: return body(std::integral_constant<DType, DType::Float32>{});
    case DType::Float64: return body(std::integral_constant<DType, DType::Float64>{});
    case DType::Float16: return body(std::integral_constant<DType, DType::Float16>{});
    case DType::BFloat16: return body(std::integral_constant<DType, DType::BFloat16>{});
    case DType::Int32: return body(std::integral_constant<DType, DType::Int32>{});
    case DType::Int64: return body(std::integral_constant<DType, DType::Int64>{});
    case DType::UInt8: return body(std::integral_constant<DType, DType::UInt8>{});
    case DType::Bool: return body(std::integral_constant<DType, DType::Bool>{});
  }
  throw DTypeError("copy_strided: unknown dtype");
}

}  // namespace

void CudaBackend::copy_strided(const TensorView& src, const TensorView& out) {
  if (src.shape != out.shape)
    throw ShapeError("copy_strided: source and destination shapes differ (expand the source first)");
  const int64_t n = out.numel();
  if (n == 0) return;
  const int src_bytes = int(dtype_size(src.dtype)), dst_bytes = int(dtype_size(out.dtype));
  if (src.dtype == out.dtype) {
    if (src.is_contiguous() && out.is_contiguous()) {
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(out.data, src.data, size_t(n) * size_t(src_bytes), cudaMemcpyDeviceToDevice,
                                        cuda::current_stream()));
      return;
    }
    switch (src_bytes) {
      case 1: return run_copy(CopyFn<uint8_t>{src.ptr<uint8_t>(), out.ptr<uint8_t>()}, src, out, 1, 1);
      case 2: return run_copy(CopyFn<uint16_t>{src.ptr<uint16_t>(), out.ptr<uint16_t>()}, src, out, 2, 2);
      case 4: return run_copy(CopyFn<uint32_t>{src.ptr<uint32_t>(), out.ptr<uint32_t>()}, src, out, 4, 4);
      case 8: return run_copy(CopyFn<uint64_t>{src.ptr<uint64_t>(), out.ptr<uint64_t>()}, src, out, 8, 8);
    }
    throw DTypeError("copy_strided: unexpected element size");
  }
  dispatch_dtype(src.dtype, [&](auto s) {
    dispatch_dtype(out.dtype, [&](auto d) {
      constexpr DType S = decltype(s)::value, D = decltype(d)::value;
      if constexpr (S != D) {
        using Fn = CastFn<S, D>;
        run_copy(Fn{static_cast<const typename Fn::src_t*>(src.data), static_cast<typename Fn::dst_t*>(out.data)}, src,
                 out, src_bytes, dst_bytes);
      }
    });
  });
}

}  // namespace tandem
