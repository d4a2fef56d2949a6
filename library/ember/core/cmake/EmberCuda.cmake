# CUDA without CMake's CUDA language: nvcc (SHIPYARD_NVCC) compiles each .cu to an object
# with one -gencode per arch of SHIPYARD_CUDA_ARCHS, so the fatbin holds SASS for exactly
# those archs, plus PTX for the highest of them (PyTorch's "+PTX"): a GPU newer than every
# listed arch JIT-compiles that PTX. The ordinary C++ linker links it with the CUDA runtime.

foreach(var SHIPYARD_NVCC SHIPYARD_CUDA_HOME SHIPYARD_CUDA_ARCHS)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "EMBER_CORE_CUDA=ON needs -D${var}=... (see library/README.md)")
  endif()
endforeach()
# The newest C++ standard the toolkit's nvcc compiles (shipyard passes it: 14 for CUDA 10.2).
if(NOT DEFINED SHIPYARD_CUDA_CXX_STANDARD OR "${SHIPYARD_CUDA_CXX_STANDARD}" STREQUAL "")
  set(SHIPYARD_CUDA_CXX_STANDARD 17)
endif()
if(NOT DEFINED SHIPYARD_CUDA_HOST_CXX OR "${SHIPYARD_CUDA_HOST_CXX}" STREQUAL "")
  set(SHIPYARD_CUDA_HOST_CXX "${CMAKE_CXX_COMPILER}")
endif()

# "3.7;5.0 8.6" -> gencode flags and sm_XY names.
string(REPLACE " " ";" _ember_archs "${SHIPYARD_CUDA_ARCHS}")
set(EMBER_CUDA_GENCODE)
set(EMBER_CUDA_ARCH_NAMES)
set(_ember_ptx_arch "")
foreach(arch IN LISTS _ember_archs)
  if(arch STREQUAL "")
    continue()
  endif()
  if(NOT arch MATCHES "^([0-9]+)\\.([0-9]+)$")
    message(FATAL_ERROR "SHIPYARD_CUDA_ARCHS: cannot read arch '${arch}' (want e.g. 8.6; PTX for the "
                        "highest arch is added by itself, so no '+PTX')")
  endif()
  set(_sm "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
  list(APPEND EMBER_CUDA_GENCODE "-gencode" "arch=compute_${_sm},code=sm_${_sm}")
  list(APPEND EMBER_CUDA_ARCH_NAMES "sm_${_sm}")
  if(_ember_ptx_arch STREQUAL "" OR arch VERSION_GREATER _ember_ptx_arch)
    set(_ember_ptx_arch "${arch}")
  endif()
endforeach()
string(REPLACE "." "" _sm "${_ember_ptx_arch}")
list(APPEND EMBER_CUDA_GENCODE "-gencode" "arch=compute_${_sm},code=compute_${_sm}")
list(JOIN EMBER_CUDA_ARCH_NAMES "," EMBER_CUDA_ARCH_STRING)

# Keep only the prefix-map flags of the C++ flags: they make the object reproducible.
set(EMBER_CUDA_HOST_FLAGS -fPIC -fvisibility=hidden)
string(REPLACE " " ";" _ember_cxx_flags "${CMAKE_CXX_FLAGS}")
foreach(flag IN LISTS _ember_cxx_flags)
  if(flag MATCHES "^-f(file|debug|macro)-prefix-map=")
    list(APPEND EMBER_CUDA_HOST_FLAGS "${flag}")
  endif()
endforeach()
list(JOIN EMBER_CUDA_HOST_FLAGS "," _ember_xcompiler)

function(ember_add_cuda_kernels target source)
  get_filename_component(_name "${source}" NAME_WE)
  set(_obj "${CMAKE_CURRENT_BINARY_DIR}/${_name}.cu.o")
  file(GLOB _headers "${CMAKE_CURRENT_SOURCE_DIR}/include/ember/*.h")
  # Reproducible objects: nvcc names its intermediates tmpxft_<pid>_… (the name lands in the
  # object's symbol table) unless it keeps them, and hashes the source's absolute path into the
  # names of anonymous namespaces (host symbols, kernel names in the fatbin) unless it is told
  # another: -keep into a folder of its own, and the path relative to this folder.
  set(_keep "${CMAKE_CURRENT_BINARY_DIR}/nvcc-${_name}")
  add_custom_command(
    OUTPUT "${_obj}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${_keep}"
    COMMAND "${SHIPYARD_NVCC}" -c "${CMAKE_CURRENT_SOURCE_DIR}/${source}" -o "${_obj}"
            -keep -keep-dir "${_keep}" -Xcudafe "--orig_src_path_name=${source}"
            -Xcicc "--orig_src_path_name=${source}"
            -ccbin "${SHIPYARD_CUDA_HOST_CXX}" -std=c++${SHIPYARD_CUDA_CXX_STANDARD} -O3 ${EMBER_CUDA_GENCODE}
            -Xcompiler "${_ember_xcompiler}"
            -I "${CMAKE_CURRENT_SOURCE_DIR}/include" -DEMBER_BUILDING -DEMBER_SHARED
    DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/${source}" ${_headers}
    COMMENT "nvcc ${source} for ${EMBER_CUDA_ARCH_STRING}"
    COMMAND_EXPAND_LISTS VERBATIM)
  set_source_files_properties("${_obj}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(${target} PRIVATE "${_obj}")
  set_source_files_properties("${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/cuda_build.cpp" PROPERTIES
    COMPILE_DEFINITIONS "EMBER_CUDA_ARCHS=\"${EMBER_CUDA_ARCH_STRING}\"")
  # The static runtime where the toolkit has it (no runtime dependency), else the shared
  # one, looked up beside the wheel of PyPI's nvidia-cuda-runtime package.
  set(_static "${SHIPYARD_CUDA_HOME}/lib64/libcudart_static.a")
  if(EXISTS "${_static}")
    target_link_libraries(${target} PRIVATE "${_static}" ${CMAKE_DL_LIBS} rt)
  else()
    find_library(EMBER_CUDART cudart PATHS "${SHIPYARD_CUDA_HOME}/lib64" "${SHIPYARD_CUDA_HOME}/lib"
                 NO_DEFAULT_PATH REQUIRED)
    target_link_libraries(${target} PRIVATE "${EMBER_CUDART}")
    set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH
      "$ORIGIN/../../nvidia/cuda_runtime/lib")
  endif()
endfunction()
