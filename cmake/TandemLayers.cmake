# The library's layers: one static library per layer, each linking only the layers below it, and
# `tandem` (tandem::tandem) the umbrella that links them all. This table is the one place the
# allowed dependencies are written down: the build (CMakeLists.txt) makes the targets from it and
# checks every `#include "..."` of the library against it (check_layering.cmake, also the ctest
# layering_includes), tests/layering links each layer alone, and the diagram in
# docs/ARCHITECTURE.md is drawn from it.
#
#   tandem_layer(<name> [DEPENDS <lower layers>] PATHS <folders>)
#
# A layer may use its own files and those of every layer its DEPENDS reach, directly or through
# each other; a layer may only depend on layers listed before it, so there are no cycles. A PATHS
# entry is a folder (everything under it; a file belongs to the layer of its deepest matching
# folder), so the folders are the layers: new files land in the layer of their folder without
# edits here. The top-level folders follow the table, base < kernels < tensor < collectives <
# engine < models (TANDEM_LIBRARY_FOLDERS), and no include points up that order either.
#
# Usable from the build and from `cmake -P` scripts (check_layering.cmake).

set(TANDEM_LAYERS)
macro(tandem_layer name)
  cmake_parse_arguments(_tandem_layer "" "" "DEPENDS;PATHS" ${ARGN})
  foreach(_tandem_dep IN LISTS _tandem_layer_DEPENDS)
    if(NOT _tandem_dep IN_LIST TANDEM_LAYERS)
      message(FATAL_ERROR "layer ${name} depends on ${_tandem_dep}, which is not a layer listed before it")
    endif()
  endforeach()
  list(APPEND TANDEM_LAYERS ${name})
  set(TANDEM_LAYER_${name}_DEPENDS ${_tandem_layer_DEPENDS})
  set(TANDEM_LAYER_${name}_PATHS ${_tandem_layer_PATHS})
endmacro()

# base: errors, the value types every layer speaks (DType, Device, the Philox generator's
# arithmetic), the name registry template and edit distance; the kernels need them without the
# Tensor above them.
tandem_layer(base PATHS base)
# kernels: the Backend interface, the CPU reference and the CUDA backend; no tensors, no autograd.
tandem_layer(kernels DEPENDS base PATHS kernels)
# tensor: Tensor, autograd (tensor/autograd) and the ops (tensor/ops), one layer: Tensor's methods
# are ops, every op records its backward, and the autograd engine accumulates gradients with ops.
tandem_layer(tensor DEPENDS kernels PATHS tensor)
tandem_layer(collectives DEPENDS tensor PATHS collectives)
tandem_layer(nn DEPENDS tensor PATHS engine/nn engine/optim)
tandem_layer(io DEPENDS tensor PATHS engine/io)
tandem_layer(data DEPENDS tensor PATHS engine/data)
tandem_layer(accelerators DEPENDS kernels PATHS engine/accelerators)
# module: the LightningModule and what it asks of whoever runs it (ModuleHost, MetricsSink).
tandem_layer(module DEPENDS nn data PATHS engine/module)
# strategies: how a step runs on the devices (precision plugin, GradScaler, CUDA graph step
# executor, Reducer, Bagua); they drive the module, never the Trainer.
tandem_layer(strategies DEPENDS module collectives accelerators PATHS engine/strategies)
# config: flags and YAML into a checked tree, class sections, the data and optimizer sections
# (the optimizer section asks the strategy registry whether a strategy fits).
tandem_layer(config DEPENDS strategies io PATHS engine/config)
# trainer: the Trainer, its loops, connectors, callbacks and option table (the trainer section).
tandem_layer(trainer DEPENDS config PATHS engine/trainer)
tandem_layer(models DEPENDS trainer PATHS models)

# The top-level folders of the library, lowest first (the layers' sources live under them; no
# file includes a folder after its own), and those above it, which no layer may include: the
# library knows no CLI.
set(TANDEM_LIBRARY_FOLDERS base kernels tensor collectives engine models)
set(TANDEM_ABOVE_LIBRARY_FOLDERS apps capi)

# tandem_layer_of(<path relative to the source root> <out var>): the layer owning the file, or
# "" when no entry matches.
function(tandem_layer_of path out)
  set(best "")
  set(best_length 0)
  foreach(layer IN LISTS TANDEM_LAYERS)
    foreach(entry IN LISTS TANDEM_LAYER_${layer}_PATHS)
      string(FIND "${path}" "${entry}" at)
      string(LENGTH "${entry}" length)
      set(rest "")
      if(at EQUAL 0)
        string(SUBSTRING "${path}" ${length} -1 rest)
      endif()
      if(rest MATCHES "^/" AND length GREATER best_length)
        set(best ${layer})
        set(best_length ${length})
      endif()
    endforeach()
  endforeach()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

# tandem_layer_reach(<layer> <out var>): the layer and every layer below it that it may use.
function(tandem_layer_reach layer out)
  set(reach ${layer})
  foreach(dep IN LISTS TANDEM_LAYER_${layer}_DEPENDS)
    tandem_layer_reach(${dep} below)
    list(APPEND reach ${below})
  endforeach()
  list(REMOVE_DUPLICATES reach)
  set(${out} ${reach} PARENT_SCOPE)
endfunction()
