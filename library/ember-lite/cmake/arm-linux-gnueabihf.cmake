# Cross toolchain: Linux armv7 hard-float with Debian's arm-linux-gnueabihf-g++. Tests
# (ctest) run the target binaries under qemu-user with the cross sysroot.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7)
set(EMBER_LITE_TRIPLE arm-linux-gnueabihf)
set(CMAKE_C_COMPILER ${EMBER_LITE_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${EMBER_LITE_TRIPLE}-g++)
# armv7-a with NEON, as Android's armeabi-v7a: the oldest 32-bit ARM phones still served.
set(CMAKE_C_FLAGS_INIT "-march=armv7-a -mfpu=neon -mfloat-abi=hard")
set(CMAKE_CXX_FLAGS_INIT "-march=armv7-a -mfpu=neon -mfloat-abi=hard")
set(CMAKE_FIND_ROOT_PATH /usr/${EMBER_LITE_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# shipyard passes the emulator release.yaml names; this default serves a plain build.
if(NOT DEFINED CMAKE_CROSSCOMPILING_EMULATOR)
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm -L /usr/${EMBER_LITE_TRIPLE})
endif()
