#include "engine/strategies/optimizer_shard.h"

#include <algorithm>
#include <map>

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"

namespace tandem {

using collectives::chunk_count;
using collectives::chunk_offset;

namespace {

// The optimizers' one 0-d state entry (optimizer.h): the step count, a float32 scalar per
// parameter. Every other entry has its parameter's shape.
constexpr const char* kStepKey = "step";

// `t` as a flat view of its elements (parameters and their state are contiguous).
Tensor flat_view(const Tensor& t) { return t.detach().reshape({t.numel()}); }

// Each rank's text, in rank order: W broadcasts of a length, then of the bytes.
std::vector<std::string> exchange_text(collectives::Communicator& comm, Device device, const std::string& mine) {
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r) {
    Tensor length = Tensor::scalar(double(r == comm.rank() ? mine.size() : 0), DType::Int64).to(device);
    comm.broadcast(length, r);
    const int64_t n = int64_t(length.item());
    Tensor bytes = Tensor::zeros({n}, DType::UInt8);
    if (r == comm.rank()) std::copy(mine.begin(), mine.end(), bytes.data_ptr<uint8_t>());
    bytes = bytes.to(device);
    comm.broadcast(bytes, r);
    const std::vector<uint8_t> host = bytes.to(Device::cpu()).to_vector<uint8_t>();
    out.emplace_back(host.begin(), host.end());
  }
  return out;
}

}  // namespace

OptimizerShard::OptimizerShard(optim::Optimizer& full, std::shared_ptr<collectives::Communicator> comm)
    : full_(&full), comm_(std::move(comm)) {
  for (const auto& group : full.param_groups()) params_.insert(params_.end(), group.params.begin(), group.params.end());
  TANDEM_CHECK(!params_.empty(), ConfigError, "strategy=ddp_sharded: the optimizer has no parameters");
  const DType dtype = params_.front().dtype();
  const Device device = params_.front().device();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (p.dtype() != dtype || p.device() != device) {
      throw ConfigError("strategy=ddp_sharded lays the optimizer's parameters end to end in one buffer, but parameter " +
                        std::to_string(i) + " is " + dtype_name(p.dtype()) + " on " + p.device().str() +
                        " while parameter 0 is " + dtype_name(dtype) + " on " + device.str() +
                        "; give all parameters one dtype and device, or use --trainer.strategy=ddp");
    }
    TANDEM_CHECK(p.is_contiguous(), ValueError,
                 "strategy=ddp_sharded: parameter " + std::to_string(i) + " of shape " + p.shape_str() + " is not contiguous");
    offsets_.push_back(total_);
    total_ += p.numel();
  }
  // Asked with a one-element group on every rank, so all ranks refuse together (a rank that
  // owns no element builds no shard optimizer).
  const nlohmann::json first_options = full.param_groups().front().options;
  if (!full.make_shard_optimizer({{{Tensor::zeros({1}, dtype, device)}, first_options}})) {
    throw ConfigError("strategy=ddp_sharded splits the optimizer's state element by element over the ranks, but " +
                      full.name() + " cannot be split so (its update of an element depends on more than that element's "
                      "gradient and state); use SGD, Adam or AdamW, or --trainer.strategy=ddp");
  }

  const int world = comm_->size(), rank = comm_->rank();
  const int64_t begin = chunk_offset(total_, world, rank), count = chunk_count(total_, world, rank);
  flat_ = Tensor::empty({total_}, dtype, device);
  shard_values_ = Tensor::zeros({count}, dtype, device);
  shard_grads_ = Tensor::zeros({count}, dtype, device);
  NoGradGuard no_grad;
  std::vector<optim::ParamGroup> shard_groups;
  size_t index = 0;
  for (size_t g = 0; g < full.param_groups().size(); ++g) {
    optim::ParamGroup shard_group{{}, full.param_groups()[g].options};
    for (size_t k = 0; k < full.param_groups()[g].params.size(); ++k, ++index) {
      const int64_t lo = std::max(offsets_[index], begin);
      const int64_t hi = std::min(offsets_[index] + params_[index].numel(), begin + count);
      if (lo >= hi) continue;
      segments_.push_back({index, lo - offsets_[index], hi - offsets_[index], lo - begin, shard_groups.size()});
      Tensor view = shard_values_.narrow(0, lo - begin, hi - lo);
      view.set_grad(shard_grads_.narrow(0, lo - begin, hi - lo));
      segment_params_.push_back(view);
      shard_group.params.push_back(view);
    }
    if (shard_group.params.empty()) continue;
    shard_group_source_.push_back(g);
    shard_groups.push_back(std::move(shard_group));
  }
  if (!shard_groups.empty()) shard_optimizer_ = full.make_shard_optimizer(std::move(shard_groups));
}

OptimizerShard::~OptimizerShard() = default;

bool OptimizerShard::serves(const optim::Optimizer& full) const {
  if (&full != full_) return false;
  size_t i = 0;
  for (const auto& group : full.param_groups())
    for (const auto& p : group.params)
      if (i >= params_.size() || !p.same_impl(params_[i++])) return false;
  return i == params_.size();
}

void OptimizerShard::reduce_gradients() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor slot = flat_.narrow(0, offsets_[i], params_[i].numel());
    const Tensor g = params_[i].grad();
    if (g.defined()) slot.copy_(flat_view(g));
    else slot.zero_();
  }
  comm_->reduce_scatter(flat_, shard_grads_, collectives::ReduceOp::Avg);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (g.defined() && g.is_contiguous()) g.zero_();
    else p.set_grad(g = Tensor::zeros(p.shape(), p.dtype(), p.device()));
  }
  for (const Segment& s : segments_) {
    Tensor target = flat_view(params_[s.param].grad()).narrow(0, s.begin, s.end - s.begin);
    target.copy_(shard_grads_.narrow(0, s.shard_offset, s.end - s.begin));
  }
}

void OptimizerShard::step() {
  NoGradGuard no_grad;
  if (shard_optimizer_) {
    for (size_t k = 0; k < shard_group_source_.size(); ++k)
      shard_optimizer_->param_groups()[k].options = full_->param_groups()[shard_group_source_[k]].options;
    // The parameters and gradients as they are now: hooks and clipping may have changed .grad.
    for (size_t j = 0; j < segments_.size(); ++j) {
      const Segment& s = segments_[j];
      const Tensor& p = params_[s.param];
      segment_params_[j].copy_(flat_view(p).narrow(0, s.begin, s.end - s.begin));
      Tensor grad = segment_params_[j].grad();
      grad.copy_(flat_view(p.grad()).narrow(0, s.begin, s.end - s.begin));
    }
    shard_optimizer_->step();
  }
  comm_->allgather(shard_values_, flat_);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor target = flat_view(params_[i]);
    target.copy_(flat_.narrow(0, offsets_[i], params_[i].numel()));
  }
}

optim::OptimizerStateDict OptimizerShard::gather_state() const {
  NoGradGuard no_grad;
  // Each parameter's state keys (and step counts) are described by the rank that owns its first
  // element; tensors are gathered key by key as flat vectors of N elements.
  nlohmann::json mine = nlohmann::json::object();
  for (size_t j = 0; j < segments_.size(); ++j) {
    if (segments_[j].begin != 0) continue;
    nlohmann::json keys = nlohmann::json::object();
    for (const auto& [key, t] : shard_optimizer_->state_of(segment_params_[j]))
      keys[key] = key == kStepKey ? nlohmann::json(t.item()) : nlohmann::json(nullptr);
    mine[std::to_string(segments_[j].param)] = keys;
  }
  const Device device = comm_->buffer_device(flat_.device());
  nlohmann::json described = nlohmann::json::object();
  for (const std::string& text : exchange_text(*comm_, device, mine.dump())) {
    const nlohmann::json theirs = nlohmann::json::parse(text);  // named: items() of a temporary dangles
    for (const auto& [param, keys] : theirs.items()) described[param] = keys;
  }

  std::map<std::string, Tensor> gathered;  // key -> N elements
  for (const auto& [param, keys] : described.items())
    for (const auto& [key, value] : keys.items())
      if (key != kStepKey) gathered.emplace(key, Tensor());
  for (auto& [key, full] : gathered) {
    Tensor chunk = Tensor::zeros({shard_values_.numel()}, flat_.dtype(), flat_.device());
    for (size_t j = 0; j < segments_.size(); ++j) {
      const StateDict& state = shard_optimizer_->state_of(segment_params_[j]);
      if (!state.contains(key)) continue;
      Tensor slot = chunk.narrow(0, segments_[j].shard_offset, segments_[j].end - segments_[j].begin);
      slot.copy_(flat_view(state.at(key)));
    }
    full = Tensor::empty({total_}, flat_.dtype(), flat_.device());
    comm_->allgather(chunk, full);
  }

  optim::OptimizerStateDict out;
  out.param_groups = full_->state_dict().param_groups;  // options and indices; the full optimizer holds no state
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto found = described.find(std::to_string(i));
    if (found == described.end()) continue;
    for (const auto& [key, value] : found->items()) {
      const Tensor t = key == kStepKey ? Tensor::scalar(value.get<double>(), DType::Float32)
                                       : gathered.at(key).narrow(0, offsets_[i], params_[i].numel()).reshape(params_[i].shape()).clone();
      out.state.insert(std::to_string(i) + "." + key, t);
    }
  }
  return out;
}

void OptimizerShard::load_state(const optim::OptimizerStateDict& state) {
  full_->load_state_dict(state);  // checks the layout and installs groups and state
  NoGradGuard no_grad;
  if (shard_optimizer_) {
    optim::OptimizerStateDict shard_state;
    shard_state.param_groups = nlohmann::json::array();
    for (size_t k = 0; k < shard_group_source_.size(); ++k) {
      nlohmann::json g = full_->param_groups()[shard_group_source_[k]].options;
      g["params"] = nlohmann::json::array();
      shard_state.param_groups.push_back(std::move(g));
    }
    for (size_t j = 0; j < segments_.size(); ++j) {
      const Segment& s = segments_[j];
      shard_state.param_groups[s.shard_group]["params"].push_back(j);
      for (const auto& [key, t] : full_->state_of(params_[s.param])) {
        const Tensor part = key == kStepKey ? t.clone() : flat_view(t).narrow(0, s.begin, s.end - s.begin).clone();
        shard_state.state.insert(std::to_string(j) + "." + key, part);
      }
    }
    shard_optimizer_->load_state_dict(shard_state);
  }
  full_->clear_state();
}

int64_t OptimizerShard::state_bytes() const {
  return (shard_optimizer_ ? shard_optimizer_->state_bytes() : 0) + full_->state_bytes();
}

}  // namespace tandem
