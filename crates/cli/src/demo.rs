//! `cudablame demo`: a faulty program run under the shim, so a new user sees a report in seconds.
//!
//! The child (`cudablame demo-child`) reaches the driver the way the static CUDA runtime does
//! (`dlopen("libcuda.so.1")`, `dlsym("cuGetProcAddress_v2")`, everything else through it), loads
//! the PTX below, launches good kernels, then `histogram_oob` (which writes 1 TiB past its buffer)
//! from [`enqueue_histogram`], then more good kernels, and reads the result back with
//! `cuMemcpyDtoH_v2`, which is where CUDA reports the illegal address. On a machine without a GPU
//! the same PTX runs on the simulated driver of `shim-tests/fake-driver` (its `// fake:` lines).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Default)]
pub struct DemoArgs {
    /// Use the simulated driver even when a GPU is present
    #[arg(long)]
    simulated: bool,
    /// Directory for the JSON report, cudablame-demo-PID.json (default: the current folder, or
    /// the temporary folder when that is not writable; created if missing)
    #[arg(long, value_name = "DIR", conflicts_with = "report")]
    report_dir: Option<PathBuf>,
    /// Path pattern of the JSON report, as `run --report` (%p pid, %h host, %r rank, %% a %;
    /// `off`: none) [CUDABLAME_REPORT]
    #[arg(long, value_name = "PATH")]
    report: Option<String>,
}

/// The demo's kernels. `histogram_oob` stores 1 TiB past its buffer: CUDA_ERROR_ILLEGAL_ADDRESS.
const PTX: &str = r#"
// fake: histogram_oob fault=700 delay_us=200
// fake: scale delay_us=100
.version 8.0
.target sm_75
.address_size 64

.visible .entry scale(.param .u64 x, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [x];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd2, %rd2, %rd3;
    ld.global.f32 %f1, [%rd2];
    mul.f32 %f2, %f1, 0f40000000;
    st.global.f32 [%rd2], %f2;
DONE:
    ret;
}

.visible .entry histogram_oob(.param .u64 bins, .param .u32 n)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [bins];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd2, %rd2, %rd3;
    add.s64 %rd2, %rd2, 1099511627776;
    st.global.u32 [%rd2], %r1;
    ret;
}
"#;

const N: u32 = 1 << 16;

/// Whether a real GPU answers: `cuInit` and at least one device.
fn gpu_present() -> bool {
    // SAFETY: plain dlopen/dlsym of the driver and two calls with valid out pointers.
    unsafe {
        let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if h.is_null() {
            return false;
        }
        let init = libc::dlsym(h, c"cuInit".as_ptr());
        let count = libc::dlsym(h, c"cuDeviceGetCount".as_ptr());
        if init.is_null() || count.is_null() {
            return false;
        }
        let init: unsafe extern "C" fn(c_uint) -> c_uint = std::mem::transmute(init);
        let count: unsafe extern "C" fn(*mut c_int) -> c_uint = std::mem::transmute(count);
        let mut n = 0;
        init(0) == 0 && count(&mut n) == 0 && n > 0 && !is_fake(h)
    }
}

/// The simulated driver exports a marker symbol; a real one does not.
fn is_fake(handle: *mut c_void) -> bool {
    // SAFETY: dlsym on a valid handle.
    !unsafe { libc::dlsym(handle, c"fakecuda_is_simulated".as_ptr()) }.is_null()
}

pub fn demo(args: DemoArgs) -> ExitCode {
    let lib = match crate::locate::library(None) {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!("cudablame demo: {e}");
            return ExitCode::from(2);
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("cudablame"));
    // The report goes where the user stands (the current folder), unless told otherwise; a
    // current folder that cannot be written falls back to the temporary folder, said below.
    let mut fallback = None;
    // `--report`, else a `CUDABLAME_REPORT` the user exported (as `run` reads it).
    let from_env = std::env::var("CUDABLAME_REPORT")
        .ok()
        .filter(|v| !v.trim().is_empty() && args.report_dir.is_none());
    // The pattern as the library would read it (else the library warns about a variable the
    // user never set and writes its own default, where the demo does not look): a bad
    // `--report` is refused, as `run --report` refuses it; a bad variable is said once and the
    // demo's default taken, as the library would.
    if let Some((p, e)) =
        (args.report.as_deref()).and_then(|p| crate::run::given_report_problem(p).map(|e| (p, e)))
    {
        eprintln!("cudablame demo: --report {p:?}: {e}; give a path pattern, or --report off");
        return ExitCode::from(2);
    }
    // Checked only where it is used: the check makes the pattern's folder (a variable that
    // `--report` overrides left its folder behind); a folder that depends on the pid is not
    // made (the demo's pid is not its program's: a review found a stray folder), only the
    // pattern checked.
    let check = |v: &str| match v.rsplit_once('/') {
        Some((dir, _)) if dir.contains('%') => cudablame_report::pattern::problem(v),
        _ => crate::run::given_report_problem(v),
    };
    let from_env = from_env
        .filter(|_| args.report.is_none())
        .filter(|v| match check(v.trim()) {
            Some(e) => {
                eprintln!("cudablame demo: CUDABLAME_REPORT={v:?}: {e}; using the demo's default");
                false
            }
            _ => true,
        });
    let report_dir_given = args.report_dir.is_some() && args.report.is_none();
    let report = match args.report.or(from_env) {
        Some(pattern) => pattern,
        None => {
            let dir = args.report_dir.unwrap_or_else(|| {
                if writable(std::path::Path::new(".")) {
                    PathBuf::new()
                } else {
                    fallback = Some(std::env::temp_dir());
                    std::env::temp_dir()
                }
            });
            dir.join("cudablame-demo-%p.json").display().to_string()
        }
    };
    // `--report-dir` checked as `--report` is (found by a fresh-user trial: a read-only folder
    // was found out only after the demo ran, "no report at ...", exit 1).
    if let Some(e) = report_dir_given
        .then(|| crate::run::given_report_problem(&report))
        .flatten()
    {
        eprintln!("cudablame demo: --report-dir: {e}");
        return ExitCode::from(2);
    }
    let off = cudablame_report::pattern::is_off(report.trim());
    // The folder the report goes into: the pattern itself when it ends in `/` (a folder
    // pattern), else its parent; not made when it depends on the demo program's pid or rank.
    let folder = if report.ends_with('/') {
        Some(std::path::Path::new(&report))
    } else {
        std::path::Path::new(&report).parent()
    };
    if let Some(dir) =
        folder.filter(|d| !off && !d.as_os_str().is_empty() && !d.to_string_lossy().contains('%'))
    {
        if let Err(e) = crate::common::make_folder(dir) {
            eprintln!("cudablame demo: {e}");
            return ExitCode::from(2);
        }
    }
    let started_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut child = std::process::Command::new(&exe);
    child
        .arg("demo-child")
        .env("LD_PRELOAD", &lib)
        .env("CUDABLAME_REPORT", &report);
    let _simdir; // kept alive until the child has run
    if !args.simulated && gpu_present() {
        eprintln!(
            "cudablame demo: running a faulty kernel on the GPU under {}",
            lib.display()
        );
    } else {
        let fake = match crate::locate::simulated_driver(Some(&lib)) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("cudablame demo: no GPU here, and the simulated driver: {e}");
                return ExitCode::from(2);
            }
        };
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => {
                eprintln!("cudablame demo: cannot make a temporary directory: {e}");
                return ExitCode::from(2);
            }
        };
        if let Err(e) = std::os::unix::fs::symlink(&fake, dir.path().join("libcuda.so.1")) {
            eprintln!("cudablame demo: cannot link the simulated driver: {e}");
            return ExitCode::from(2);
        }
        child.env("LD_LIBRARY_PATH", dir.path());
        eprintln!(
            "cudablame demo: no GPU found; running on the simulated driver ({})",
            fake.display()
        );
        _simdir = dir;
    }
    let (pid, status) = match child.spawn().and_then(|mut c| Ok((c.id(), c.wait()?))) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cudablame demo: cannot run the demo program: {e}");
            return ExitCode::from(2);
        }
    };
    let code = status
        .code()
        .map_or_else(|| status.to_string(), |c| format!("status {c}"));
    eprintln!("cudablame demo: the demo program exited with {code}: it got the CUDA error, as it would without cudablame");
    if off {
        eprintln!(
            "cudablame demo: no JSON report (report off); the text report above names the culprit"
        );
        return ExitCode::SUCCESS;
    }
    // Where the pattern says, else where the library put it when it could not write there
    // (its default in the folder the program started in, this one: `report::sink::write_file`).
    let found = written_report(&report, pid, started_ns)
        .or_else(|| written_report(crate::run::DEFAULT_REPORT, pid, started_ns));
    let path = found.as_ref().map_or_else(
        || crate::common::expand_pattern(&report, pid),
        |(p, _)| p.display().to_string(),
    );
    match found.map(|(_, r)| r) {
        Some(r) => {
            let kernel = r["culprit"]["op"]["kernel"].as_str().unwrap_or("?");
            let confidence = r["culprit"]["confidence"].as_str().unwrap_or("?");
            let reporter = r["reporting_call"]["entry_point"].as_str().unwrap_or("?");
            let site = r["culprit"]["op"]["stack"]
                .as_array()
                .and_then(|s| {
                    s.iter()
                        .filter_map(|f| f["function"].as_str())
                        .find(|f| f.contains("enqueue_"))
                })
                .unwrap_or("?");
            let hint = r["culprit"]["hint"]
                .as_str()
                .map(|h| format!("\nWhat to check (the report's hint): {h}."))
                .unwrap_or_default();
            let where_ = match &fallback {
                Some(tmp) => format!(
                    " (the current folder is not writable, so it went to {})",
                    tmp.display()
                ),
                None if !path.contains('/') => " (in the current folder)".to_string(),
                None => String::new(),
            };
            eprintln!(
                "cudablame demo: CUDA reported the error at {reporter}; cudablame names {kernel} ({confidence}), launched from {site}.{hint}\nJSON report: {path}{where_}"
            );
            if kernel == "histogram_oob" {
                ExitCode::SUCCESS
            } else {
                // Said, not only the exit status (a fresh-user trial: `CUDABLAME_MARKERS=off`
                // names a suspect, and the demo exited 1 without a word).
                eprintln!(
                    "cudablame demo: the demo's culprit is histogram_oob; a CUDABLAME_* setting \
                     in this environment made cudablame name {kernel} instead (exit status 1)"
                );
                ExitCode::from(1)
            }
        }
        None => {
            eprintln!("cudablame demo: no report at {path}");
            ExitCode::from(1)
        }
    }
}

/// The report the demo program (pid `pid`, started at `started_ns`) wrote for `pattern`, and its
/// path: where the library puts it (`pattern::file_path`: inside a folder pattern, as
/// `cudablame-%h-%p.json`) under the first free name (`pattern::numbered`: a report never
/// replaces a file, so an earlier run's report at the same path sends it to `NAME.1.json`). A
/// file counts only when it is this run's: its pid, and an error time after the start (a reused
/// pid's older report has an earlier one).
fn written_report(
    pattern: &str,
    pid: u32,
    started_ns: u64,
) -> Option<(PathBuf, serde_json::Value)> {
    use cudablame_report::pattern::{file_path, numbered, MAX_NUMBERED};
    let expanded = crate::common::expand_pattern(pattern, pid);
    let in_folder = crate::common::expand_pattern(crate::run::DEFAULT_REPORT, pid);
    let target = file_path(&expanded, &in_folder);
    (0..=MAX_NUMBERED).find_map(|n| {
        let path = numbered(&target, n);
        // A regular file of a report's size at most: a device such as /dev/zero never ends.
        if !std::fs::metadata(&path).ok()?.is_file() {
            return None;
        }
        let bytes = crate::show::read_limited(&path).ok()?;
        let r = serde_json::from_slice::<serde_json::Value>(&bytes).ok()?;
        (r["process"]["pid"].as_u64() == Some(u64::from(pid))
            && r["reporting_call"]["time_ns"].as_u64() >= Some(started_ns))
        .then_some((path, r))
    })
}

/// Whether a file can be created in `dir` (a probe file, removed at once).
fn writable(dir: &std::path::Path) -> bool {
    tempfile::Builder::new()
        .prefix(".cudablame-probe-")
        .tempfile_in(dir)
        .is_ok()
}

type CUresult = c_uint;
type Gpa =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_uint) -> CUresult;

/// Looks `name` up through `cuGetProcAddress_v2`, as the CUDA runtime does.
unsafe fn entry<T: Copy>(gpa: Gpa, name: &CStr) -> T {
    let mut p: *mut c_void = std::ptr::null_mut();
    let mut status = 0;
    // SAFETY: `gpa` is the driver's cuGetProcAddress_v2 (the caller's contract); the name is
    // NUL-terminated and both out-pointers are valid locals.
    let rc = unsafe { gpa(name.as_ptr(), &mut p, 12000, 0, &mut status) };
    if rc != 0 || p.is_null() {
        eprintln!("demo: the driver has no {}", name.to_string_lossy());
        std::process::exit(3);
    }
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: `T` is a function-pointer type of pointer size (asserted above) matching the
    // entry point's prototype (the caller's contract); `p` is non-null.
    unsafe { std::mem::transmute_copy(&p) }
}

type Launch = unsafe extern "C" fn(
    *mut c_void,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    *mut c_void,
    *mut *mut c_void,
    *mut *mut c_void,
) -> CUresult;

struct Demo {
    launch: Launch,
    scale: *mut c_void,
    histogram: *mut c_void,
    buffer: u64,
}

impl Demo {
    fn run(&self, f: *mut c_void) -> CUresult {
        let mut x = self.buffer;
        let mut n = N;
        let mut params = [
            &mut x as *mut u64 as *mut c_void,
            &mut n as *mut u32 as *mut c_void,
        ];
        // SAFETY: a valid kernel handle and parameter array matching the PTX signatures.
        unsafe {
            (self.launch)(
                f,
                N / 256,
                1,
                1,
                256,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    }
}

/// The host's own work between two launches (preparing the next step, as a data-loading loop
/// does): 600 us. It also makes the demo's report `exact` under the default marker budget
/// (`CUDABLAME_MARKERS=budget` puts a progress marker after an op once 500 us of host time have
/// passed since the stream's last one), as it is in host-bound programs; launches back to back
/// would give "one of these N ops". The launches after the faulty one follow it at once, so the
/// error comes back from the read-back copy, as it does in most programs.
fn host_work() {
    std::thread::sleep(std::time::Duration::from_micros(600));
}

/// Launches `times` kernels, each after [`host_work`] when `work` is set, and says so if a launch
/// fails (which also keeps each caller's frame: the launch is not a tail call).
fn enqueue(d: &Demo, f: *mut c_void, times: usize, what: &str, work: bool) {
    for _ in 0..times {
        if work {
            host_work();
        }
        let rc = d.run(f);
        if rc != 0 {
            eprintln!("demo: launching {what} returned {rc}");
        }
    }
}

#[inline(never)]
fn enqueue_scale(d: &Demo) {
    enqueue(d, d.scale, 3, "scale", true);
}

/// The faulty launch, written here rather than through [`Demo::run`]: the report's `launched:`
/// line names the innermost function of the program on the launch stack, and a new user's first
/// report should point at the function that launched the faulty kernel, not at a generic wrapper.
#[inline(never)]
fn enqueue_histogram(d: &Demo) {
    let (mut bins, mut n) = (d.buffer, N);
    let mut params = [
        &mut bins as *mut u64 as *mut c_void,
        &mut n as *mut u32 as *mut c_void,
    ];
    let (p, grid) = (params.as_mut_ptr(), N / 256);
    let (stream, extra) = (std::ptr::null_mut(), std::ptr::null_mut());
    host_work();
    // SAFETY: a valid kernel handle and a parameter array matching `histogram_oob(u64, u32)`.
    let rc = unsafe { (d.launch)(d.histogram, grid, 1, 1, 256, 1, 1, 0, stream, p, extra) };
    if rc != 0 {
        eprintln!("demo: launching histogram_oob returned {rc}");
    }
}

#[inline(never)]
fn enqueue_normalize(d: &Demo) {
    enqueue(d, d.scale, 2, "scale", false);
}

/// The faulty program. Exits 1 with the error the read-back returned.
pub fn child() -> ExitCode {
    // SAFETY: driver API calls with valid arguments, as a C program would make them.
    unsafe {
        let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW);
        if h.is_null() {
            eprintln!("demo: cannot load libcuda.so.1");
            return ExitCode::from(3);
        }
        let gpa_ptr = libc::dlsym(h, c"cuGetProcAddress_v2".as_ptr());
        if gpa_ptr.is_null() {
            eprintln!("demo: libcuda.so.1 has no cuGetProcAddress_v2");
            return ExitCode::from(3);
        }
        let gpa: Gpa = std::mem::transmute(gpa_ptr);
        let init: unsafe extern "C" fn(c_uint) -> CUresult = entry(gpa, c"cuInit");
        let device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CUresult =
            entry(gpa, c"cuDeviceGet");
        let retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> CUresult =
            entry(gpa, c"cuDevicePrimaryCtxRetain");
        let set_current: unsafe extern "C" fn(*mut c_void) -> CUresult =
            entry(gpa, c"cuCtxSetCurrent");
        let load: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CUresult =
            entry(gpa, c"cuModuleLoadData");
        let get_function: unsafe extern "C" fn(
            *mut *mut c_void,
            *mut c_void,
            *const c_char,
        ) -> CUresult = entry(gpa, c"cuModuleGetFunction");
        let alloc: unsafe extern "C" fn(*mut u64, usize) -> CUresult = entry(gpa, c"cuMemAlloc");
        let htod: unsafe extern "C" fn(u64, *const c_void, usize) -> CUresult =
            entry(gpa, c"cuMemcpyHtoD");
        let dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> CUresult =
            entry(gpa, c"cuMemcpyDtoH");
        let launch: Launch = entry(gpa, c"cuLaunchKernel");

        let (mut dev, mut ctx, mut module) = (0, std::ptr::null_mut(), std::ptr::null_mut());
        let ptx = std::ffi::CString::new(PTX).unwrap_or_default();
        let mut demo = Demo {
            launch,
            scale: std::ptr::null_mut(),
            histogram: std::ptr::null_mut(),
            buffer: 0,
        };
        let setup = [
            init(0),
            device_get(&mut dev, 0),
            retain(&mut ctx, dev),
            set_current(ctx),
            load(&mut module, ptx.as_ptr() as *const c_void),
            get_function(&mut demo.scale, module, c"scale".as_ptr()),
            get_function(&mut demo.histogram, module, c"histogram_oob".as_ptr()),
            alloc(&mut demo.buffer, N as usize * 4),
        ];
        if let Some(rc) = setup.iter().find(|&&rc| rc != 0) {
            eprintln!("demo: driver setup failed with {rc}");
            return ExitCode::from(3);
        }
        let host = vec![1.0f32; N as usize];
        htod(demo.buffer, host.as_ptr() as *const c_void, host.len() * 4);
        enqueue_scale(&demo);
        enqueue_histogram(&demo);
        enqueue_normalize(&demo);
        let mut back = vec![0f32; N as usize];
        let rc = dtoh(
            back.as_mut_ptr() as *mut c_void,
            demo.buffer,
            back.len() * 4,
        );
        eprintln!("demo: cuMemcpyDtoH returned {rc}");
        if rc == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
}
