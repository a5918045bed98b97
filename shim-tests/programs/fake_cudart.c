/* A minimal stand-in for the CUDA runtime's driver entry point access, built as
 * libfakecudart.so: cudaGetDriverEntryPoint resolves through cuGetProcAddress_v2 of the driver it
 * is linked with (-lcuda). Returns 0 (cudaSuccess) or 500 (cudaErrorSymbolNotFound). */
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"

unsigned cudaGetDriverEntryPoint(const char *symbol, void **func, unsigned long long flags,
                                 unsigned *status) {
    CUdriverProcAddressQueryResult result = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult rc = cuGetProcAddress_v2(symbol, func, 12080, flags, &result);
    if (status) *status = (unsigned)result;
    return rc == CUDA_SUCCESS ? 0 : 500;
}
