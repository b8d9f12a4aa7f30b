/* kernelzero stub of cublasLt.h (see cublas_v2.h in this folder). */
#pragma once
#include "cublas_v2.h"
typedef struct cublasLtContext* cublasLtHandle_t;
