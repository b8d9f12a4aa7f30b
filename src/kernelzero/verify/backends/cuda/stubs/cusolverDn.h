/* kernelzero stub of cusolverDn.h (see cublas_v2.h in this folder). */
#pragma once
#include "cusolver_common.h"
#include "cublas_v2.h"
typedef struct cusolverDnContext* cusolverDnHandle_t;
