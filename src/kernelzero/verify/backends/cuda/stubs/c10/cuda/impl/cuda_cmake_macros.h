/* kernelzero stand-in for the CMake-generated header that CPU wheels of torch do not ship. */
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
