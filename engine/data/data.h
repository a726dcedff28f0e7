// Everything in engine/data: datasets, samplers, the loader, the IDX reader, data modules.
#pragma once
#include "engine/data/batch.h"
#include "engine/data/data_loader.h"
#include "engine/data/data_module.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/idx_reader.h"
#include "engine/data/sampler.h"
#include "engine/data/tensor_dataset.h"
