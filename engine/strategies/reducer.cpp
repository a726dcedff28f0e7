#include "engine/strategies/reducer.h"

#include <functional>
#include <map>
#include <utility>

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"

namespace tandem {

using collectives::WorkHandle;
using Clock = std::chrono::steady_clock;

struct Reducer::State {
  std::vector<Tensor> params;
  std::shared_ptr<collectives::Communicator> comm;
  std::vector<ReducerBucket> buckets;
  std::vector<Tensor> buffers;                 // one flat buffer per bucket
  std::vector<size_t> bucket_of, slot_of;      // per parameter
  std::vector<HookHandle> hooks;               // per parameter: our gradient-ready hook
  // Per pass:
  bool sync = false;
  bool in_pass = false;
  std::vector<bool> filled;                    // per parameter
  std::vector<int64_t> pending;                // unfilled slots per bucket
  size_t next_to_launch = 0;
  std::vector<WorkHandle> works;               // per bucket, once launched
  BucketAverager average_bucket;               // empty: allreduce(avg)
  ReducerStats stats;

  Tensor slot(size_t param) const {
    const ReducerBucket& b = buckets[bucket_of[param]];
    const Tensor& p = params[param];
    return buffers[bucket_of[param]].narrow(0, b.offsets[slot_of[param]], p.numel()).view(p.shape());
  }

  void fill(size_t param, const Tensor& grad) {
    Tensor dst = slot(param);
    if (grad.defined()) {
      // A gradient accumulated in place into its slot (finalize made the slot the .grad) is there already.
      if (grad.raw_data() != dst.raw_data() || grad.dtype() != dst.dtype()) dst.copy_(grad);
    } else {
      dst.zero_();
    }
    filled[param] = true;
    pending[bucket_of[param]] -= 1;
  }

  // Launches ready buckets in bucket order; `from_backward` only counts where they started.
  void launch_ready(bool from_backward) {
    while (next_to_launch < buckets.size() && pending[next_to_launch] == 0) {
      const Tensor& bucket = buffers[next_to_launch];
      works[next_to_launch] = average_bucket ? average_bucket(*comm, bucket)
                                             : comm->allreduce_async(bucket, collectives::ReduceOp::Avg);
      stats.bucket_launches += 1;
      if (from_backward) stats.buckets_launched_in_backward += 1;
      ++next_to_launch;
    }
    // MPI progresses nonblocking collectives only inside MPI calls: poll the ones in flight so
    // they advance while backward computes.
    for (size_t b = 0; b < next_to_launch; ++b) {
      if (works[b]) works[b]->is_completed();
    }
  }

  void on_grad_ready(size_t param) {
    if (!sync || !in_pass || filled[param]) return;
    NoGradGuard no_grad;
    fill(param, params[param].grad());
    launch_ready(true);
  }
};

// Buckets in reverse parameter order, one open bucket per (dtype, device).
std::vector<ReducerBucket> assign_buckets(const std::vector<Tensor>& params, const ReducerOptions& options) {
  std::vector<ReducerBucket> done;
  std::map<std::pair<int, std::string>, ReducerBucket> open;
  auto cap_for_next = [&] { return done.empty() ? options.first_bucket_cap_bytes : options.bucket_cap_bytes; };
  for (size_t k = params.size(); k-- > 0;) {
    const Tensor& p = params[k];
    DType dtype = p.dtype();
    if (dtype == DType::Float16 || dtype == DType::BFloat16) dtype = DType::Float32;
    const auto key = std::make_pair(static_cast<int>(dtype), p.device().str());
    ReducerBucket& b = open[key];
    if (b.params.empty()) {
      b.dtype = dtype;
      b.device = p.device();
    }
    b.params.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += p.numel();
    if (b.numel * int64_t(dtype_size(dtype)) >= cap_for_next()) {
      done.push_back(std::move(b));
      open.erase(key);
    }
  }
  for (auto& [key, b] : open) done.push_back(std::move(b));
  return done;
}

namespace {

// Every rank must hold the same parameters; compare a fingerprint by min/max allreduce.
void check_same_parameters(const std::vector<Tensor>& params, collectives::Communicator& comm) {
  int64_t numel = 0;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over dims and dtypes
  auto mix = [&](uint64_t v) { hash = (hash ^ v) * 1099511628211ull; };
  for (const Tensor& p : params) {
    numel += p.numel();
    mix(static_cast<uint64_t>(p.dtype()));
    for (int64_t d : p.shape()) mix(static_cast<uint64_t>(d));
  }
  const int64_t mine[3] = {int64_t(params.size()), numel, int64_t(hash & 0x3fffffffffffffffull)};
  Tensor lo = Tensor::from_vector<int64_t>({mine[0], mine[1], mine[2]}, {3});
  Tensor hi = lo.clone();
  comm.allreduce(lo, collectives::ReduceOp::Min);
  comm.allreduce(hi, collectives::ReduceOp::Max);
  const auto l = lo.to_vector<int64_t>(), h = hi.to_vector<int64_t>();
  if (l != h) {
    throw ConfigError("DDP: the ranks hold different models: this rank (" + std::to_string(comm.rank()) + ") has " +
                      std::to_string(mine[0]) + " trainable parameters with " + std::to_string(mine[1]) +
                      " elements, while across ranks the counts range " + std::to_string(l[0]) + ".." +
                      std::to_string(h[0]) + " and " + std::to_string(l[1]) + ".." + std::to_string(h[1]) +
                      (l[0] == h[0] && l[1] == h[1] ? " (same sizes, different shapes or dtypes)" : "") +
                      "; build the same model with the same configuration on every rank");
  }
}

}  // namespace

Reducer::Reducer(std::vector<Tensor> params, std::shared_ptr<collectives::Communicator> comm, ReducerOptions options)
    : state_(std::make_shared<State>()) {
  TANDEM_CHECK(comm != nullptr, ValueError, "Reducer: the communicator is null");
  TANDEM_CHECK(options.bucket_cap_bytes > 0 && options.first_bucket_cap_bytes > 0, ValueError,
               "Reducer: bucket caps must be > 0 bytes");
  for (const Tensor& p : params) {
    TANDEM_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), ValueError,
                 "Reducer: every parameter must be a leaf that requires grad");
    TANDEM_CHECK(is_floating(p.dtype()), DTypeError, "Reducer: parameters must be floating point, got " +
                                                         std::string(dtype_name(p.dtype())));
  }
  State& s = *state_;
  s.params = std::move(params);
  s.comm = std::move(comm);
  s.average_bucket = options.average_bucket;
  check_same_parameters(s.params, *s.comm);
  s.buckets = assign_buckets(s.params, options);
  s.bucket_of.assign(s.params.size(), 0);
  s.slot_of.assign(s.params.size(), 0);
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    s.buffers.push_back(Tensor::zeros({s.buckets[b].numel}, s.buckets[b].dtype, s.buckets[b].device));
    for (size_t j = 0; j < s.buckets[b].params.size(); ++j) {
      s.bucket_of[s.buckets[b].params[j]] = b;
      s.slot_of[s.buckets[b].params[j]] = j;
    }
  }
  std::weak_ptr<State> weak = state_;
  for (size_t k = 0; k < s.params.size(); ++k) {
    s.hooks.push_back(s.params[k].register_post_accumulate_grad_hook([weak, k](const Tensor&) {
      if (auto st = weak.lock()) st->on_grad_ready(k);
    }));
  }
}

Reducer::~Reducer() {
  // The parameters outlive us (a model wrapped again and again must not collect dead hooks).
  for (HookHandle& hook : state_->hooks) hook.remove();
  // Let a pass that was started finish on the wire before its buffers go away.
  for (auto& w : state_->works) {
    if (!w) continue;
    try {
      w->wait();
    } catch (...) {
    }
  }
}

void Reducer::prepare_for_backward(bool sync) {
  State& s = *state_;
  TANDEM_CHECK(!(s.in_pass && s.sync && sync), AutogradError,
               "DDP: a second synchronized backward started before the optimizer step of the first "
               "(finalize() was not called); accumulate with no_sync, then step");
  s.sync = sync;
  if (!sync) return;
  s.in_pass = true;
  s.filled.assign(s.params.size(), false);
  s.pending.assign(s.buckets.size(), 0);
  for (size_t b = 0; b < s.buckets.size(); ++b) s.pending[b] = int64_t(s.buckets[b].params.size());
  s.works.assign(s.buckets.size(), nullptr);
  s.next_to_launch = 0;
}

void Reducer::finalize() {
  State& s = *state_;
  if (!s.sync || !s.in_pass) return;
  NoGradGuard no_grad;
  const auto start = Clock::now();
  for (size_t k = 0; k < s.params.size(); ++k) {
    if (!s.filled[k]) s.fill(k, s.params[k].grad());  // unused this pass: its accumulated grad, or zeros
  }
  s.launch_ready(false);
  for (auto& w : s.works) w->wait();
  // Each .grad becomes a view of its averaged slot (PyTorch's gradient_as_bucket_view): no copy
  // back, one pass over the gradients less a step. The next backward refills the slots, so a
  // .grad kept past the next step changes with it, as in PyTorch. Half-precision parameters
  // reduce in a float32 bucket and get a copy in their own dtype.
  for (size_t k = 0; k < s.params.size(); ++k) {
    const Tensor averaged = s.slot(k);
    if (averaged.dtype() == s.params[k].dtype()) {
      s.params[k].set_grad(averaged);
    } else if (Tensor g = s.params[k].grad(); g.defined()) {
      g.copy_(averaged);
    } else {
      s.params[k].set_grad(averaged.to(s.params[k].dtype()));
    }
  }
  s.works.assign(s.buckets.size(), nullptr);
  s.in_pass = false;
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  s.stats.reductions += 1;
  s.stats.last_exposed_ms = ms;
  s.stats.total_exposed_ms += ms;
}

const std::vector<ReducerBucket>& Reducer::buckets() const { return state_->buckets; }
const ReducerStats& Reducer::stats() const { return state_->stats; }

}  // namespace tandem
