@echo on
:: embervision for one Python, for cmd.exe: the steps of build_embervision.sh, against the
:: libembervision under %LIBRARY_PREFIX%.
set CMAKE_GENERATOR=Ninja
set "CMAKE_ARGS=%CMAKE_ARGS% %SHIPYARD_CMAKE_ARGS% -DEMBERVISION_CORE_PREFIX=%LIBRARY_PREFIX% -DEMBERVISION_BUNDLE_CORE=OFF -DCMAKE_PREFIX_PATH=%LIBRARY_PREFIX%"
"%PYTHON%" -c "import sys; from scikit_build_core.build import build_wheel; print(build_wheel(sys.argv[1]))" "%SRC_DIR%\dist"
if errorlevel 1 exit 1
for %%w in ("%SRC_DIR%\dist\embervision-*.whl") do "%PYTHON%" -m installer --no-compile-bytecode "%%~w"
if errorlevel 1 exit 1
if not "%SHIPYARD_PACKAGE_FILES%"=="" xcopy /E /I /Y /Q "%SHIPYARD_PACKAGE_FILES%" "%SP_DIR%"
if errorlevel 1 exit 1
