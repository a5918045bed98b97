"""Python launches against the fake driver, for cudablame's Python-frame tests (tests/python.rs).

Usage: python3 py_launch.py SCENARIO [WORKDIR]
  main      good kernels, then the faulting one from launch_bad() called by step(), on the main
            thread; main() synchronizes (the reporting call).
  thread    the same step() on a threading.Thread; the main thread synchronizes after join().
  sites     the kernel `nth` launched 50 times from one line (one launch site), its 40th
            execution faulting.
  reloaded  the kernel `second` launched from one line through a library unloaded and loaded
            again between the two launches; the second faults.
  many_sites `good` launched from 200 distinct Python functions (200 launch sites), 5 rounds,
            then the faulting `bad` once.
  two_paths the kernel `second` launched twice from one line through a library
            (PY_LAUNCH_LIB, two_paths_lib.c) by two native paths; the second faults.
  reused_cached  code objects freed and new ones made at their addresses, every launch taking
            one path (`reused_cached`): the culprit's stack differs from a launched one only in
            its second frame's code object, new at the old one's address.
  backward  a stand-in for torch's backward pass (a package named torch written under
            WORKDIR/site-packages): the caller launches the initial gradient inside
            torch.autograd.backward(), then blocks while a worker thread named pt_autograd_0 runs
            a custom backward written in Python, which launches the faulting kernel.

ctypes releases the GIL around each foreign call, like PyTorch around its op dispatch. Lines the
test looks for carry a "# @name" marker. Prints key=value lines: pid, main_tid, launch_tid,
sync_rc, and callers (the frames above launch_bad as Python itself sees them).
"""
import ctypes
import os
import sys
import threading

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
cuda.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]

MODULE = (
    b"// fake: good\n"
    b"// fake: bad fault=700\n"
    b"// fake: nth fault=700 fault_on=40\n"
    b"// fake: second fault=700 fault_on=2\n"
    b".visible .entry good(\n"
    b".visible .entry bad(\n"
    b".visible .entry nth(\n"
    b".visible .entry second(\n"
)

ctx = ctypes.c_void_p()
good = ctypes.c_void_p()
bad = ctypes.c_void_p()
nth = ctypes.c_void_p()
second = ctypes.c_void_p()


def check(what, rc):
    if rc != 0:
        print(f"setup_failed={what} rc={rc}", flush=True)
        sys.exit(3)


def setup():
    dev = ctypes.c_int()
    mod = ctypes.c_void_p()
    check("cuInit", cuda.cuInit(0))
    check("cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(dev), 0))
    check("cuDevicePrimaryCtxRetain", cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check("cuCtxSetCurrent", cuda.cuCtxSetCurrent(ctx))
    check("cuModuleLoadData", cuda.cuModuleLoadData(ctypes.byref(mod), MODULE))
    check("good", cuda.cuModuleGetFunction(ctypes.byref(good), mod, b"good"))
    check("bad", cuda.cuModuleGetFunction(ctypes.byref(bad), mod, b"bad"))
    check("nth", cuda.cuModuleGetFunction(ctypes.byref(nth), mod, b"nth"))
    check("second", cuda.cuModuleGetFunction(ctypes.byref(second), mod, b"second"))


def launch_good():
    check("launch good", cuda.cuLaunchKernel(good, 1, 1, 1, 32, 1, 1, 0, None, None, None))  # @launch_good


def callers():
    """The frames above the caller as Python sees them, outermost last: file:line:name."""
    f, out = sys._getframe(2), []
    while f is not None:
        out.append(f"{f.f_code.co_filename}:{f.f_lineno}:{f.f_code.co_name}")
        f = f.f_back
    return "|".join(out)


def launch_bad():
    print(f"callers={callers()}", flush=True)
    return cuda.cuLaunchKernel(bad, 8, 1, 1, 256, 1, 1, 0, None, None, None)  # @launch_bad


def step():
    launch_good()
    launch_good()
    launch_bad()  # @step


def one_site():
    for _ in range(50):
        cuda.cuLaunchKernel(nth, 2, 1, 1, 64, 1, 1, 0, None, None, None)  # @one_site


def many_sites(sites=200, rounds=5):
    """`good` from `sites` distinct functions (each its own code object: its own Python stack,
    so its own launch site), `rounds` times over, then `bad`."""
    fns = []
    for i in range(sites):
        ns = {"cuda": cuda, "good": good}
        src = f"def site_{i}():\n    return cuda.cuLaunchKernel(good, 1, 1, 1, 32, 1, 1, 0, None, None, None)\n"
        exec(compile(src, f"many_sites_{i}.py", "exec"), ns)
        fns.append(ns[f"site_{i}"])
    for _ in range(rounds):
        for f in fns:
            check("launch good", f())
    launch_bad()


def two_paths():
    """One line launches `second` twice through two_paths_lib.c's forward(), the first time by
    via_first_path, the second (which faults) by via_second_path."""
    lib = ctypes.CDLL(os.environ["PY_LAUNCH_LIB"])
    lib.forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    launch = ctypes.cast(cuda.cuLaunchKernel, ctypes.c_void_p)
    for which in (0, 1):
        lib.forward(launch, second, which)  # @two_paths


def reloaded():
    """One line launches `second` through a library (PY_LAUNCH_LIB, dlclose_lib.c) twice, the
    library unloaded and loaded again in between (the loader tends to map it where it was); the
    second launch faults, and went through the library loaded now."""
    import _ctypes

    launch = ctypes.cast(cuda.cuLaunchKernel, ctypes.c_void_p)
    for i in range(2):
        lib = ctypes.CDLL(os.environ["PY_LAUNCH_LIB"])
        lib.launch_from_plugin.argtypes = [ctypes.c_void_p] * 3
        lib.launch_from_plugin(launch, second, None)  # @reloaded
        if i == 0:
            handle = lib._handle
            del lib
            _ctypes.dlclose(handle)


def in_thread():
    print(f"launch_tid={threading.get_native_id()}", flush=True)
    check("thread context", cuda.cuCtxSetCurrent(ctx))
    step()


# The torch stand-in: file names and function names as torch has them, which is what cudablame
# recognizes (torch/autograd/__init__.py backward, torch/autograd/function.py apply).
FAKE_TORCH = {
    "torch/__init__.py": "from . import autograd\n",
    "torch/autograd/__init__.py": (
        "import threading\n"
        "from . import function\n"
        "\n"
        "def backward(make_grad, node):\n"
        "    make_grad()  # like ones_like() in _make_grads\n"
        "    worker = threading.Thread(target=function.worker_main, args=(node,))\n"
        "    worker.start()\n"
        "    worker.join()  # like run_backward: the caller waits while the engine works\n"
    ),
    "torch/autograd/function.py": (
        "import ctypes\n"
        "\n"
        "def worker_main(node):\n"
        "    ctypes.CDLL(None).prctl(15, b'pt_autograd_0', 0, 0, 0)  # PR_SET_NAME, like Engine::thread_init\n"
        "    apply(node)\n"
        "\n"
        "def apply(node):  # like BackwardCFunction.apply\n"
        "    return node()\n"
    ),
}


def write_fake_torch(workdir):
    site = os.path.join(workdir, "site-packages")
    for rel, text in FAKE_TORCH.items():
        path = os.path.join(site, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    sys.path.insert(0, site)


def custom_backward():
    print(f"launch_tid={threading.get_native_id()}", flush=True)
    check("worker context", cuda.cuCtxSetCurrent(ctx))
    launch_bad()  # @custom_backward


def train_step(torch):
    torch.autograd.backward(launch_good, custom_backward)  # @backward_call


def make_launcher(i, first_line):
    """A fresh function `gen_<i>` in file `<gen i>`, starting at `first_line`, that calls
    `launch`: compiled now, so its code object is new (and freed when the caller drops it)."""
    src = "\n" * (first_line - 1) + f"def gen_{i}(launch):\n    return launch()\n"
    ns = {}
    exec(compile(src, f"<gen {i}>", "exec"), ns)
    return ns[f"gen_{i}"]


def reused():
    """Code objects freed and new ones made at their addresses (the allocator reuses a freed
    block): fresh functions launch once each and are dropped; after each, a fresh function
    compiled at a first line none of them had is made, until one lands on an address a launched
    code object had: that one launches the bad kernel. cudablame must name it, not what it
    remembered of the address."""
    launched = set()
    for i in range(5000):
        fn = make_launcher(i, 1 + i % 7)
        launched.add(id(fn.__code__))
        fn(launch_good)
        del fn
        fn = make_launcher(100000 + i, 8)
        if id(fn.__code__) in launched:
            print(f"reused_address={id(fn.__code__):#x}", flush=True)
            print(f"last_function=gen_{100000 + i}", flush=True)
            return fn(launch_bad)
        del fn
    print("reused_address=none", flush=True)


KERNEL = [None]


def launch_chosen():
    """Launches the kernel in KERNEL[0]: one launch site (one line) for every kernel."""
    return cuda.cuLaunchKernel(KERNEL[0], 8, 1, 1, 256, 1, 1, 0, None, None, None)  # @launch_chosen


def reused_cached():
    """As `reused`, but every launch takes one path, the same line of each function: the
    stack launching the culprit differs from an earlier one only in the code object of its
    second frame, a new one at the address of a freed one, with the same bytecode. cudablame
    keeps whole stacks per thread and must not take the earlier one for this one."""
    launched = set()
    for i in range(10000):
        probe = i % 2 == 1
        fn = make_launcher(100000 + i, 8) if probe else make_launcher(i, 1 + i % 7)
        reused = probe and id(fn.__code__) in launched
        if probe and not reused:
            del fn
            continue
        KERNEL[0] = bad if reused else good
        if reused:
            print(f"reused_address={id(fn.__code__):#x}", flush=True)
            print(f"last_function=gen_{100000 + i}", flush=True)
        launched.add(id(fn.__code__))
        rc = fn(launch_chosen)  # @reused_cached
        if reused:
            return rc
        del fn
    print("reused_address=none", flush=True)


def main():
    scenario = sys.argv[1] if len(sys.argv) > 1 else "main"
    print(f"pid={os.getpid()}", flush=True)
    print(f"main_tid={threading.get_native_id()}", flush=True)
    setup()
    if scenario == "main":
        print(f"launch_tid={threading.get_native_id()}", flush=True)
        step()
    elif scenario == "thread":
        t = threading.Thread(target=in_thread)
        t.start()
        t.join()
    elif scenario == "reused":
        reused()
    elif scenario == "reused_cached":
        reused_cached()
    elif scenario == "sites":
        one_site()
    elif scenario == "two_paths":
        two_paths()
    elif scenario == "many_sites":
        many_sites()
    elif scenario == "reloaded":
        reloaded()
    elif scenario == "backward":
        write_fake_torch(sys.argv[2])
        import torch

        train_step(torch)
    else:
        print(f"unknown scenario {scenario}")
        return 4
    rc = cuda.cuCtxSynchronize()  # @sync
    print(f"sync_rc={rc}", flush=True)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
