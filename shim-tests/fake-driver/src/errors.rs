//! `CUresult` codes and their names / descriptions (as `cuGetErrorName` / `cuGetErrorString`
//! of the real driver report them).

use crate::types::CUresult;

/// `CUDA_SUCCESS`.
pub const SUCCESS: CUresult = 0;
/// `CUDA_ERROR_INVALID_VALUE`.
pub const INVALID_VALUE: CUresult = 1;
/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const OUT_OF_MEMORY: CUresult = 2;
/// `CUDA_ERROR_NOT_INITIALIZED`.
pub const NOT_INITIALIZED: CUresult = 3;
/// `CUDA_ERROR_NO_DEVICE`.
pub const NO_DEVICE: CUresult = 100;
/// `CUDA_ERROR_INVALID_DEVICE`.
pub const INVALID_DEVICE: CUresult = 101;
/// `CUDA_ERROR_INVALID_IMAGE`.
pub const INVALID_IMAGE: CUresult = 200;
/// `CUDA_ERROR_INVALID_CONTEXT`.
pub const INVALID_CONTEXT: CUresult = 201;
/// `CUDA_ERROR_FILE_NOT_FOUND`.
pub const FILE_NOT_FOUND: CUresult = 301;
/// `CUDA_ERROR_INVALID_HANDLE`.
pub const INVALID_HANDLE: CUresult = 400;
/// `CUDA_ERROR_ILLEGAL_STATE`.
pub const ILLEGAL_STATE: CUresult = 401;
/// `CUDA_ERROR_NOT_FOUND`.
pub const NOT_FOUND: CUresult = 500;
/// `CUDA_ERROR_NOT_READY`.
pub const NOT_READY: CUresult = 600;
/// `CUDA_ERROR_ILLEGAL_ADDRESS`.
pub const ILLEGAL_ADDRESS: CUresult = 700;
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED`.
pub const CONTEXT_IS_DESTROYED: CUresult = 709;
/// `CUDA_ERROR_NOT_SUPPORTED`.
pub const NOT_SUPPORTED: CUresult = 801;
/// `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`.
pub const STREAM_CAPTURE_UNSUPPORTED: CUresult = 900;
/// `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`.
pub const STREAM_CAPTURE_INVALIDATED: CUresult = 901;
/// `CUDA_ERROR_STREAM_CAPTURE_UNMATCHED`.
pub const STREAM_CAPTURE_UNMATCHED: CUresult = 903;
/// `CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`.
pub const STREAM_CAPTURE_IMPLICIT: CUresult = 906;
/// `CUDA_ERROR_CAPTURED_EVENT`.
pub const CAPTURED_EVENT: CUresult = 907;
/// `CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD`.
pub const STREAM_CAPTURE_WRONG_THREAD: CUresult = 908;
/// `CUDA_ERROR_UNKNOWN`.
pub const UNKNOWN: CUresult = 999;

/// `(code, NUL-terminated name, NUL-terminated description)` for every code the fake knows.
const TABLE: &[(CUresult, &str, &str)] = &[
    (0, "CUDA_SUCCESS\0", "no error\0"),
    (1, "CUDA_ERROR_INVALID_VALUE\0", "invalid argument\0"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY\0", "out of memory\0"),
    (3, "CUDA_ERROR_NOT_INITIALIZED\0", "initialization error\0"),
    (4, "CUDA_ERROR_DEINITIALIZED\0", "driver shutting down\0"),
    (
        100,
        "CUDA_ERROR_NO_DEVICE\0",
        "no CUDA-capable device is detected\0",
    ),
    (
        101,
        "CUDA_ERROR_INVALID_DEVICE\0",
        "invalid device ordinal\0",
    ),
    (
        200,
        "CUDA_ERROR_INVALID_IMAGE\0",
        "device kernel image is invalid\0",
    ),
    (
        201,
        "CUDA_ERROR_INVALID_CONTEXT\0",
        "invalid device context\0",
    ),
    (
        202,
        "CUDA_ERROR_CONTEXT_ALREADY_CURRENT\0",
        "context already current\0",
    ),
    (
        209,
        "CUDA_ERROR_NO_BINARY_FOR_GPU\0",
        "no kernel image is available for execution on the device\0",
    ),
    (
        218,
        "CUDA_ERROR_INVALID_PTX\0",
        "a PTX JIT compilation failed\0",
    ),
    (
        300,
        "CUDA_ERROR_INVALID_SOURCE\0",
        "device kernel image is invalid\0",
    ),
    (301, "CUDA_ERROR_FILE_NOT_FOUND\0", "file not found\0"),
    (
        400,
        "CUDA_ERROR_INVALID_HANDLE\0",
        "invalid resource handle\0",
    ),
    (
        401,
        "CUDA_ERROR_ILLEGAL_STATE\0",
        "the operation cannot be performed in the present state\0",
    ),
    (500, "CUDA_ERROR_NOT_FOUND\0", "named symbol not found\0"),
    (600, "CUDA_ERROR_NOT_READY\0", "device not ready\0"),
    (
        700,
        "CUDA_ERROR_ILLEGAL_ADDRESS\0",
        "an illegal memory access was encountered\0",
    ),
    (
        701,
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES\0",
        "too many resources requested for launch\0",
    ),
    (
        702,
        "CUDA_ERROR_LAUNCH_TIMEOUT\0",
        "the launch timed out and was terminated\0",
    ),
    (
        709,
        "CUDA_ERROR_CONTEXT_IS_DESTROYED\0",
        "context is destroyed\0",
    ),
    (710, "CUDA_ERROR_ASSERT\0", "device-side assert triggered\0"),
    (
        714,
        "CUDA_ERROR_HARDWARE_STACK_ERROR\0",
        "hardware stack error\0",
    ),
    (
        715,
        "CUDA_ERROR_ILLEGAL_INSTRUCTION\0",
        "an illegal instruction was encountered\0",
    ),
    (
        716,
        "CUDA_ERROR_MISALIGNED_ADDRESS\0",
        "misaligned address\0",
    ),
    (
        717,
        "CUDA_ERROR_INVALID_ADDRESS_SPACE\0",
        "operation not supported on global/shared address space\0",
    ),
    (718, "CUDA_ERROR_INVALID_PC\0", "invalid program counter\0"),
    (
        719,
        "CUDA_ERROR_LAUNCH_FAILED\0",
        "unspecified launch failure\0",
    ),
    (
        720,
        "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE\0",
        "too many blocks in cooperative launch\0",
    ),
    (
        800,
        "CUDA_ERROR_NOT_PERMITTED\0",
        "operation not permitted\0",
    ),
    (
        801,
        "CUDA_ERROR_NOT_SUPPORTED\0",
        "operation not supported\0",
    ),
    (
        900,
        "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED\0",
        "operation not permitted when stream is capturing\0",
    ),
    (
        901,
        "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED\0",
        "operation failed due to a previous error during capture\0",
    ),
    (
        902,
        "CUDA_ERROR_STREAM_CAPTURE_MERGE\0",
        "operation would result in a merge of separate capture sequences\0",
    ),
    (
        903,
        "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED\0",
        "capture was not ended in the same stream as it began\0",
    ),
    (
        904,
        "CUDA_ERROR_STREAM_CAPTURE_UNJOINED\0",
        "capturing stream has unjoined work\0",
    ),
    (
        905,
        "CUDA_ERROR_STREAM_CAPTURE_ISOLATION\0",
        "dependency created on uncaptured work in another stream\0",
    ),
    (
        906,
        "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT\0",
        "operation would make the legacy stream depend on a capturing blocking stream\0",
    ),
    (
        907,
        "CUDA_ERROR_CAPTURED_EVENT\0",
        "operation not permitted on an event last recorded in a capturing stream\0",
    ),
    (
        908,
        "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD\0",
        "attempt to terminate a thread-local capture sequence from another thread\0",
    ),
    (909, "CUDA_ERROR_TIMEOUT\0", "wait operation timed out\0"),
    (999, "CUDA_ERROR_UNKNOWN\0", "unknown error\0"),
];

/// The NUL-terminated `(name, description)` of `code`, or `None` if the fake does not know it.
pub fn lookup(code: CUresult) -> Option<(&'static str, &'static str)> {
    TABLE
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, name, desc)| (*name, *desc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_nul_terminated_once() {
        for (code, name, desc) in TABLE {
            assert!(name.ends_with('\0') && desc.ends_with('\0'), "{code}");
            assert_eq!(name.matches('\0').count(), 1, "{code}");
            assert_eq!(desc.matches('\0').count(), 1, "{code}");
        }
    }

    #[test]
    fn known_codes() {
        assert_eq!(
            lookup(700),
            Some((
                "CUDA_ERROR_ILLEGAL_ADDRESS\0",
                "an illegal memory access was encountered\0"
            ))
        );
        assert_eq!(
            lookup(710).map(|x| x.1),
            Some("device-side assert triggered\0")
        );
        assert_eq!(lookup(12345), None);
    }
}
