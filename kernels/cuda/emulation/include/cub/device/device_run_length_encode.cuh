// The emulation build's CUB twin (cub_twins.h).
#pragma once
#include "cub_twins.h"
