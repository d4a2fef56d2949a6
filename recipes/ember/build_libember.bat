@echo on
:: libember for cmd.exe: the steps of build_libember.sh. A native library of a Windows conda
:: package installs under %LIBRARY_PREFIX% (Library\ with bin\, lib\, include\), not %PREFIX%.
cmake -S core -B build-core -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="%LIBRARY_PREFIX%" %CMAKE_ARGS% %SHIPYARD_CMAKE_ARGS%
if errorlevel 1 exit 1
cmake --build build-core --parallel "%CPU_COUNT%"
if errorlevel 1 exit 1
cmake --install build-core
if errorlevel 1 exit 1
