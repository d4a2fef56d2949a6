# Cross toolchain: Linux arm64 with Debian's aarch64-linux-gnu-g++. Tests (ctest) run the
# target binaries under qemu-user with the cross sysroot's loader and libraries.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(EMBER_LITE_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${EMBER_LITE_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${EMBER_LITE_TRIPLE}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${EMBER_LITE_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# shipyard passes the emulator release.yaml names; this default serves a plain build.
if(NOT DEFINED CMAKE_CROSSCOMPILING_EMULATOR)
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${EMBER_LITE_TRIPLE})
endif()
