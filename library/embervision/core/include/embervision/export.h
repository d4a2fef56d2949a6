// Symbol visibility for libembervision.
#pragma once

#if defined(_WIN32)
#  if defined(EMBERVISION_BUILDING)
#    define EV_API __declspec(dllexport)
#  else
#    define EV_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define EV_API __attribute__((visibility("default")))
#else
#  define EV_API
#endif
