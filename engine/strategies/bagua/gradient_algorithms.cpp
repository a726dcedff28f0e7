#include "base/error.h"
#include "engine/strategies/bagua/algorithms.h"
#include "engine/strategies/bagua/compressed_average.h"
#include "engine/strategies/bagua/min_max_uint8.h"
#include "engine/strategies/bagua/point_to_point.h"

namespace tandem::bagua {

namespace {

int ranks_per_node_for(const GradientOptions& options, const collectives::Communicator& comm) {
  const int ranks = options.ranks_per_node > 0 ? options.ranks_per_node : comm.local_size();
  check_node_grouping(comm.size(), ranks);
  return ranks;
}

std::string hierarchy_text(const GradientOptions& options) {
  if (!options.hierarchical) return "";
  return options.ranks_per_node > 0 ? ", hierarchical over nodes of " + std::to_string(options.ranks_per_node) + " ranks"
                                    : ", hierarchical over the launcher's nodes";
}

}  // namespace

GradientOptions parse_gradient_options(const InitParams& params) {
  GradientOptions options;
  options.hierarchical = parse_bool_option(params, "hierarchical");
  const auto it = params.find("ranks_per_node");
  if (it != params.end() && !it->second.empty()) {
    options.ranks_per_node = static_cast<int>(
        parse_int_option(params, "ranks_per_node", 1, "the ranks grouped as one node by hierarchical"));
    if (!options.hierarchical) {
      throw ConfigError("bagua: ranks_per_node=" + it->second + " only groups ranks for hierarchical=true; set "
                        "--trainer.strategy.hierarchical=true or drop ranks_per_node");
    }
  }
  return options;
}

GradientAllreduce::GradientAllreduce(const InitParams& params) : options_(parse_gradient_options(params)) {}

void GradientAllreduce::validate(int world_size) const {
  if (options_.ranks_per_node > 0) check_node_grouping(world_size, options_.ranks_per_node);
}

BucketAverager GradientAllreduce::bucket_averager(const collectives::Communicator& comm) const {
  if (!options_.hierarchical) return {};  // the Reducer's own allreduce(avg): ddp
  const int ranks = ranks_per_node_for(options_, comm);
  return [ranks](collectives::Communicator& c, const Tensor& bucket) {
    hierarchical_average(c, bucket, ranks, exact_group_average);
    return finished_work(c, "bagua hierarchical allreduce(avg, " + std::to_string(bucket.numel()) + " elements)");
  };
}

std::string GradientAllreduce::describe() const {
  return "gradient_allreduce: float gradients averaged in buckets" + hierarchy_text(options_);
}

ByteGrad::ByteGrad(const InitParams& params) : options_(parse_gradient_options(params)) {}

void ByteGrad::validate(int world_size) const {
  if (world_size < 2) {
    throw ConfigError("bagua algorithm=bytegrad compresses the gradients ranks exchange, but this job has " +
                      std::to_string(world_size) + " process; run 2 or more (--trainer.devices=N) or use "
                      "algorithm=gradient_allreduce");
  }
  if (options_.ranks_per_node > 0) check_node_grouping(world_size, options_.ranks_per_node);
}

BucketAverager ByteGrad::bucket_averager(const collectives::Communicator& comm) const {
  validate(comm.size());
  const bool hierarchical = options_.hierarchical;
  const int ranks = hierarchical ? ranks_per_node_for(options_, comm) : 1;
  return [hierarchical, ranks](collectives::Communicator& c, const Tensor& bucket) {
    const GroupAverage compressed = [](collectives::Communicator& cc, const Tensor& t, const std::vector<int>& group) {
      compressed_group_average(cc, t, group, kDefaultCompressionBlock);
    };
    if (hierarchical) {
      hierarchical_average(c, bucket, ranks, compressed);
    } else {
      std::vector<int> everyone(static_cast<size_t>(c.size()));
      for (int r = 0; r < c.size(); ++r) everyone[static_cast<size_t>(r)] = r;
      compressed(c, bucket, everyone);
    }
    return finished_work(c, "bagua bytegrad(" + std::to_string(bucket.numel()) + " elements)");
  };
}

std::string ByteGrad::describe() const {
  return "bytegrad: gradients sent as 8-bit codes with a min/max per " + std::to_string(kDefaultCompressionBlock) +
         " elements (scatter-reduce, then allgather)" + hierarchy_text(options_);
}

}  // namespace tandem::bagua
