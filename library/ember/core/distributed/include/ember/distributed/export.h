// Symbol visibility for libember_distributed (a DLL on Windows, a .so elsewhere).
#pragma once

#if defined(_WIN32) && defined(EMBER_DISTRIBUTED_SHARED)
#  if defined(EMBER_DISTRIBUTED_BUILDING)
#    define EMBER_DIST_API __declspec(dllexport)
#  else
#    define EMBER_DIST_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define EMBER_DIST_API __attribute__((visibility("default")))
#else
#  define EMBER_DIST_API
#endif
