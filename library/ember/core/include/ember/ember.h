// Umbrella header for ember's C++ API.
#pragma once

#include "ember/c_api.h"
#include "ember/cuda.h"
#include "ember/deterministic.h"
#include "ember/fft.h"
#include "ember/kernels.h"
#include "ember/version.h"
