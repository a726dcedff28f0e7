#include "collectives/communicator.h"

#include "engine/core/error.h"

namespace tandem::collectives {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Product: return "prod";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& name) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product})
    if (name == reduce_op_name(op)) return op;
  throw ConfigError("unknown reduce op '" + name + "'; allowed: sum, avg, max, min, prod");
}

}  // namespace tandem::collectives
