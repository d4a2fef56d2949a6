# EMBER_ORIGIN: the folder of the binary being loaded, as the run-time linker spells it in an
# RPATH: $ORIGIN on Linux (ld.so), @loader_path on macOS (dyld, which reads $ORIGIN literally).
# Every RPATH of ember's core and extensions starts with it.
if(APPLE)
  set(EMBER_ORIGIN "@loader_path")
else()
  set(EMBER_ORIGIN "$ORIGIN")
endif()
