# Merge static archives INPUTS (;-list) into OUTPUT with AR's MRI script mode (GNU ar and
# llvm-ar both read it), so objects with equal names in different inputs all survive.
if(NOT AR OR NOT OUTPUT OR NOT INPUTS)
  message(FATAL_ERROR "merge_static.cmake needs -DAR= -DOUTPUT= -DINPUTS=")
endif()
set(script "create ${OUTPUT}\n")
foreach(input IN LISTS INPUTS)
  string(APPEND script "addlib ${input}\n")
endforeach()
string(APPEND script "save\nend\n")
file(REMOVE "${OUTPUT}")
file(WRITE "${OUTPUT}.mri" "${script}")
execute_process(COMMAND "${AR}" -M INPUT_FILE "${OUTPUT}.mri" RESULT_VARIABLE result
                ERROR_VARIABLE error)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "merging static archives failed: ${error}")
endif()
