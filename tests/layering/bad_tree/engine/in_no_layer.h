// A library file in no layer's folder: check_layering.cmake must name it.
#pragma once
