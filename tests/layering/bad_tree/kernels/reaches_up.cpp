// A kernels file that reaches up the layer table: check_layering.cmake must reject lines 5 and 6
// (ctest layering_rejects_bad_tree) and accept line 4.
#include "base/error.h"
#include "base/dtype.h"
#include "engine/trainer/trainer.h"
#include "apps/tandem/cli.h"
