// Everything in engine/nn, plus the ops: include this one header to build models.
#pragma once
#include "engine/nn/activation.h"
#include "engine/nn/conv.h"
#include "engine/nn/init.h"
#include "engine/nn/linear.h"
#include "engine/nn/module.h"
#include "engine/nn/normalization.h"
#include "engine/nn/sequential.h"
#include "engine/nn/state_dict.h"
#include "tensor/ops/ops.h"  // models compose modules with ops
