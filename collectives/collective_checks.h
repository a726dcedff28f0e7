// Argument checks and small tensor helpers shared by every Communicator backend, so each
// backend rejects the same calls with the same messages.
#pragma once
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace tandem::collectives {

// "allreduce(sum, float32, 1000 elements)"; op may be empty for non-reductions.
std::string describe(const char* name, const std::string& detail, DType dtype, int64_t numel);
// "exchange(2 send(s), 2 receive(s))".
std::string describe_exchange(const std::vector<PeerTransfer>& transfers);

// Defined and contiguous (ValueError otherwise, saying what to do).
void check_buffer(const char* name, const char* role, const Tensor& t);
// Same dtype (DTypeError) and the given element counts (ShapeError).
void check_same_dtype(const char* name, const Tensor& input, const Tensor& output);
void check_numel(const char* name, const char* role, const Tensor& t, int64_t expected,
                 const std::string& why);
// Reductions: every dtype but bool.
void check_reducible(const char* name, DType dtype);
// 0 <= rank < size (ValueError naming the role: "root", "dst", "src").
void check_rank(const char* name, const char* role, int rank, int size);

// Divides every element by n in place (host tensor); integers truncate toward zero.
void divide_in_place(const Tensor& host, int64_t n);
// Element-wise a = op(a, b) on host tensors of one dtype; used by tests' expectations and by the
// local backend's checks. Avg is treated as Sum (divide afterwards).
void reduce_into(const Tensor& a, const Tensor& b, ReduceOp op);

}  // namespace tandem::collectives
