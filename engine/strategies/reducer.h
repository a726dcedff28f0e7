// Reducer: DDP's gradient averaging, overlapped with backward (PyTorch DDP's Reducer, in
// miniature).
//
// Parameters are grouped into buckets in REVERSE registration order (the last layer's
// gradients are final first during backward), one dtype and device per bucket, the first
// bucket capped at 1 MiB (it starts communicating early) and the rest at 25 MiB; a parameter
// larger than the cap gets a bucket of its own. Each bucket is one flat buffer.
//
// During backward, each parameter's post-accumulate hook copies its final .grad into its
// bucket slot; when a bucket's last slot is filled the bucket becomes ready, and ready buckets
// are launched as asynchronous allreduce(avg) (or the options' average_bucket, bagua's
// algorithms) strictly in bucket order (0, 1, 2, ...), so every
// rank issues the same collectives in the same order even if its gradients finish in another
// order. finalize() (before the optimizer step) fills the slots of parameters that got no
// gradient this pass (their accumulated .grad, or zeros), launches what is left, waits for all
// buckets, and makes every parameter's .grad a view of its averaged slot (PyTorch's
// gradient_as_bucket_view; half-precision parameters get a copy in their dtype). The time spent
// waiting there is the communication that backward did not hide ("exposed").
//
// no_sync: prepare_for_backward(false) makes the hooks do nothing, so gradients accumulate
// locally (accumulate_grad_batches); the next synchronized backward reduces the sum.
//
// Construction checks that every rank has the same parameters (count, shapes, dtypes): a
// mismatch is a ConfigError on every rank instead of a hang or silently wrong averages.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "tensor/tensor.h"

namespace tandem {

// Starts averaging one flat bucket across the ranks, in place (the result replaces the
// bucket's values once the returned Work completes). Every rank calls it for the same buckets
// in the same order.
using BucketAverager = std::function<collectives::WorkHandle(collectives::Communicator& comm, const Tensor& bucket)>;

struct ReducerOptions {
  int64_t bucket_cap_bytes = 25ll << 20;
  int64_t first_bucket_cap_bytes = 1ll << 20;
  // How a bucket is averaged; empty: allreduce(avg). Bagua's algorithms put theirs here
  // (hierarchical, compressed).
  BucketAverager average_bucket;
};

// Where each bucket sits, for tests and logs.
struct ReducerBucket {
  DType dtype = DType::Float32;              // float16/bfloat16 parameters reduce in float32
  Device device = Device::cpu();
  std::vector<size_t> params;                // indices into the parameter list, in bucket order
  std::vector<int64_t> offsets;              // element offset of each in the flat buffer
  int64_t numel = 0;
};

struct ReducerStats {
  int64_t reductions = 0;          // synchronized steps finalized
  double last_exposed_ms = 0.0;    // finalize()'s wait in the last synchronized step
  double total_exposed_ms = 0.0;
  int64_t buckets_launched_in_backward = 0;  // over all steps; the rest launched by finalize
  int64_t bucket_launches = 0;
  double mean_exposed_ms() const { return reductions ? total_exposed_ms / double(reductions) : 0.0; }
  // Totals of two runs (last_exposed_ms keeps the later one's).
  ReducerStats& operator+=(const ReducerStats& o) {
    reductions += o.reductions;
    total_exposed_ms += o.total_exposed_ms;
    buckets_launched_in_backward += o.buckets_launched_in_backward;
    bucket_launches += o.bucket_launches;
    if (o.reductions) last_exposed_ms = o.last_exposed_ms;
    return *this;
  }
};

// The buckets a Reducer over `params` makes (the rule above), without a communicator: for
// logs and the scaling model (scaling_model.h).
std::vector<ReducerBucket> assign_buckets(const std::vector<Tensor>& params, const ReducerOptions& options);

class Reducer {
 public:
  // params: the module's trainable parameters in registration order (requires_grad leaves).
  // Collective over comm: every rank constructs its Reducer together.
  Reducer(std::vector<Tensor> params, std::shared_ptr<collectives::Communicator> comm, ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Before each backward: sync=false for no_sync (accumulation micro-batches).
  void prepare_for_backward(bool sync);
  // After a synchronized backward, before clipping and the optimizer step. Every rank must
  // call it for every synchronized backward. No-op after a no_sync backward.
  void finalize();

  const std::vector<ReducerBucket>& buckets() const;
  const ReducerStats& stats() const;

  struct State;  // shared with the gradient hooks, which outlive nothing they point to

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tandem
