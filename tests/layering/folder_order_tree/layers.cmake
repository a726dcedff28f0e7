# A layer table that lets the kernels layer use a layer in engine/, a folder above kernels/:
# check_layering.cmake must still reject kernels/reaches_into_engine.cpp's include of it
# (ctest layering_rejects_folder_order), whatever the table allows.
include(${CMAKE_CURRENT_LIST_DIR}/../../../cmake/TandemLayers.cmake)
set(TANDEM_LAYERS)
tandem_layer(engine PATHS engine)
tandem_layer(kernels DEPENDS engine PATHS kernels)
set(TANDEM_LIBRARY_FOLDERS kernels engine)
