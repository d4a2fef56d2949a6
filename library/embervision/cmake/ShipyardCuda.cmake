# CUDA through shipyard's contract: nvcc is called directly (one -gencode per
# listed arch, so the fatbin holds SASS for exactly those archs) and the result is
# linked by the ordinary C++ linker. The driver library is never linked.

foreach(var SHIPYARD_NVCC SHIPYARD_CUDA_HOME SHIPYARD_CUDA_ARCHS)
  if(NOT ${var})
    message(FATAL_ERROR "SHIPYARD_CUDA=ON needs ${var}")
  endif()
endforeach()

# "3.7;8.6+PTX" -> -gencode arch=compute_37,code=sm_37 ... (+PTX also embeds PTX).
set(SHIPYARD_GENCODE_FLAGS "")
string(REPLACE " " ";" _archs "${SHIPYARD_CUDA_ARCHS}")
foreach(arch IN LISTS _archs)
  if(arch STREQUAL "")
    continue()
  endif()
  string(REPLACE "+PTX" "" _num "${arch}")
  string(REPLACE "." "" _num "${_num}")
  list(APPEND SHIPYARD_GENCODE_FLAGS "-gencode" "arch=compute_${_num},code=sm_${_num}")
  if(arch MATCHES "\\+PTX$")
    list(APPEND SHIPYARD_GENCODE_FLAGS "-gencode" "arch=compute_${_num},code=compute_${_num}")
  endif()
endforeach()

set(SHIPYARD_NVCC_HOST_FLAGS "")
if(SHIPYARD_CUDA_HOST_CXX)
  list(APPEND SHIPYARD_NVCC_HOST_FLAGS "-ccbin" "${SHIPYARD_CUDA_HOST_CXX}")
endif()

# Compile each .cu to an object in the build tree. nvcc runs in the source
# directory with a relative file name so no absolute source path reaches the binary.
function(shipyard_cuda_objects out_var)
  set(objects "")
  foreach(src IN LISTS ARGN)
    get_filename_component(name "${src}" NAME_WE)
    set(obj "${CMAKE_CURRENT_BINARY_DIR}/cuda/${name}.o")
    add_custom_command(
      OUTPUT "${obj}"
      COMMAND "${CMAKE_COMMAND}" -E make_directory "${CMAKE_CURRENT_BINARY_DIR}/cuda"
      COMMAND "${SHIPYARD_NVCC}" ${SHIPYARD_NVCC_HOST_FLAGS} -std=c++17 -O3
              -Xcompiler=-fPIC -Xcompiler=-fvisibility=hidden
              "-Xcompiler=-ffile-prefix-map=${CMAKE_CURRENT_SOURCE_DIR}=."
              ${SHIPYARD_GENCODE_FLAGS}
              -I "${CMAKE_CURRENT_SOURCE_DIR}/csrc"
              -c "${src}" -o "${obj}"
      WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
      DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/${src}"
      COMMENT "nvcc ${src}"
      VERBATIM)
    set_source_files_properties("${obj}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
    list(APPEND objects "${obj}")
  endforeach()
  set(${out_var} ${objects} PARENT_SCOPE)
endfunction()

# Static cudart when the toolkit has it (self-contained wheel), else the shared one.
function(shipyard_link_cudart target)
  set(static_rt "${SHIPYARD_CUDA_HOME}/lib64/libcudart_static.a")
  if(EXISTS "${static_rt}")
    target_link_libraries(${target} PRIVATE "${static_rt}" Threads::Threads ${CMAKE_DL_LIBS} rt)
  else()
    find_library(SHIPYARD_CUDART_SHARED cudart PATHS "${SHIPYARD_CUDA_HOME}/lib64" "${SHIPYARD_CUDA_HOME}/lib" NO_DEFAULT_PATH REQUIRED)
    target_link_libraries(${target} PRIVATE "${SHIPYARD_CUDART_SHARED}")
  endif()
  target_include_directories(${target} PRIVATE "${SHIPYARD_CUDA_HOME}/include")
endfunction()
