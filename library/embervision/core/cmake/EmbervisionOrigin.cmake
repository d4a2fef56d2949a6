# EMBERVISION_ORIGIN: the folder of the binary being loaded, as the run-time linker spells it in
# an RPATH: $ORIGIN on Linux (ld.so), @loader_path on macOS (dyld, which reads $ORIGIN literally).
# Every RPATH of embervision's core and extension starts with it.
if(APPLE)
  set(EMBERVISION_ORIGIN "@loader_path")
else()
  set(EMBERVISION_ORIGIN "$ORIGIN")
endif()
