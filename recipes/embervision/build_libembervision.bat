@echo on
:: libembervision for cmd.exe: the steps of build_libembervision.sh, under %LIBRARY_PREFIX% (where
:: a Windows conda package keeps native libraries, libpng's and libjpeg's included).
cmake -S core -B build-core -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="%LIBRARY_PREFIX%" -DCMAKE_PREFIX_PATH="%LIBRARY_PREFIX%" -DCMAKE_FIND_FRAMEWORK=NEVER %CMAKE_ARGS% %SHIPYARD_CMAKE_ARGS%
if errorlevel 1 exit 1
cmake --build build-core --parallel "%CPU_COUNT%"
if errorlevel 1 exit 1
cmake --install build-core
if errorlevel 1 exit 1
