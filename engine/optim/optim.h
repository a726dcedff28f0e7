// Everything in engine/optim: optimizers, schedulers, gradient clipping.
#pragma once
#include "engine/optim/adam.h"
#include "engine/optim/clip_grad.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/sgd.h"
