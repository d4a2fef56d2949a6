// Symbol visibility for libember (shared) and its static variant.
#pragma once

#if defined(_WIN32) && defined(EMBER_SHARED)
#  if defined(EMBER_BUILDING)
#    define EMBER_API __declspec(dllexport)
#  else
#    define EMBER_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define EMBER_API __attribute__((visibility("default")))
#else
#  define EMBER_API
#endif
