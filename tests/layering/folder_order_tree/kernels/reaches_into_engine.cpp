// A kernels file whose include the layer table (layers.cmake) allows but the folder order
// forbids: check_layering.cmake must reject line 4.
#include "kernels/reaches_into_engine.h"
#include "engine/helper.h"
