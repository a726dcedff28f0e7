// A header of the engine/ folder, which the kernels/ folder below it may not include.
#pragma once
