"""The launcher: ``python -m gpool run [--stats] [--conf CONF] -- PROGRAM ARGS...`` (also the
``gpool-run`` console script) runs PROGRAM under the packaged drop-in, libgpool_preload.so:

- LD_PRELOAD gets the drop-in appended (after what it already holds);
- PYTORCH_NO_CUDA_MEMORY_CACHING=1, so PyTorch's own caching allocator steps aside and its
  cudaMalloc/cudaFree calls reach gpool (an explicit value in the environment is kept);
- GPOOL_CONF is passed on; --conf adds keys to it;
- --stats: every allocation and free is traced (GPOOL_TRACE, to a temporary file unless
  GPOOL_TRACE or a trace= key already names one) and a summary is printed on stderr when the
  program exits: allocations, frees, peak bytes in use per kind, blocks still live.

The exit status is the program's (128+N when signal N ended it)."""

import argparse
import os
import signal
import subprocess
import sys
import tempfile

PRELOAD_NAME = "libgpool_preload.so"


def preload_path():
    """The drop-in to preload: next to the package (a wheel carries it), else
    $GPOOL_PRELOAD. Raises OSError saying where it looked."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), PRELOAD_NAME)
    if os.path.isfile(here):
        return here
    env = os.environ.get("GPOOL_PRELOAD")
    if env and os.path.isfile(env):
        return os.path.abspath(env)
    raise OSError("gpool run: cannot find %s; looked at %s and $GPOOL_PRELOAD (%s); install "
                  "the package with pip install ./python, or set GPOOL_PRELOAD"
                  % (PRELOAD_NAME, here, env or "unset"))


def child_environment(environ=None, conf=None, trace=None):
    """The environment the program runs in (see the module's text)."""
    env = dict(os.environ if environ is None else environ)
    path = preload_path()
    if ":" in path or " " in path:
        raise OSError("gpool run: %s: LD_PRELOAD cannot hold a path with ':' or ' '" % path)
    old = env.get("LD_PRELOAD", "").strip()
    parts = [p for p in old.replace(" ", ":").split(":") if p]
    if path not in parts:
        env["LD_PRELOAD"] = old + ":" + path if old else path
    env.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")
    if conf:
        env["GPOOL_CONF"] = env["GPOOL_CONF"] + "," + conf if env.get("GPOOL_CONF") else conf
    if trace:
        env["GPOOL_TRACE"] = trace
    return env


def _trace_named(env):
    if env.get("GPOOL_TRACE"):
        return env["GPOOL_TRACE"]
    for item in env.get("GPOOL_CONF", "").split(","):
        key, _, value = item.partition("=")
        if key.strip() == "trace" and value:
            return value
    return None


def summarize(path):
    """The --stats summary of a GPOOL_TRACE file: a list of lines."""
    live = {}  # pointer -> (size, kind)
    in_use = {}
    peak = {}
    allocs = frees = 0
    try:
        f = open(path)
    except FileNotFoundError:
        return ["gpool: the drop-in served no allocation (%s was not written)" % path]
    except OSError as e:
        return ["gpool: no statistics: %s" % e]
    with f:
        for line in f:
            cols = line.rstrip("\n").split(",")
            if len(cols) < 5 or cols[0] == "Thread":
                continue
            action, ptr = cols[2], cols[3]
            if action == "allocate":
                kind = cols[6] if len(cols) > 6 and cols[6] else "device"
                size = int(cols[4])
                live[ptr] = (size, kind)
                allocs += 1
                in_use[kind] = in_use.get(kind, 0) + size
                peak[kind] = max(peak.get(kind, 0), in_use[kind])
            elif action == "free":
                frees += 1
                size, kind = live.pop(ptr, (0, None))
                if kind:
                    in_use[kind] -= size
    lines = ["gpool: %d allocations, %d frees, %d blocks live at exit (%d bytes)"
             % (allocs, frees, len(live), sum(s for s, _ in live.values()))]
    for kind in sorted(peak):
        lines.append("gpool: peak %s bytes in use: %d (%.1f MiB)"
                     % (kind, peak[kind], peak[kind] / (1 << 20)))
    return lines


def _parser(prog):
    p = argparse.ArgumentParser(
        prog=prog, description="Run a program under gpool's LD_PRELOAD drop-in "
        "(libgpool_preload.so from this package).")
    p.add_argument("--stats", action="store_true",
                   help="trace allocations and print a summary on stderr at exit")
    p.add_argument("--conf", default="", help="GPOOL_CONF keys to add (key=value,...)")
    p.add_argument("--print-env", action="store_true",
                   help="print the variables the program would get, and run nothing")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    return p


def run(argv, prog="gpool run"):
    """The launcher's main: returns the exit status."""
    args = _parser(prog).parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd and not args.print_env:
        sys.stderr.write("%s: no program given (%s [--stats] -- PROGRAM ARGS...)\n"
                         % (prog, prog))
        return 2
    tmp = None
    trace = None
    try:
        if args.stats:
            conf_env = dict(os.environ)
            if args.conf:
                conf_env["GPOOL_CONF"] = args.conf
            trace = _trace_named(conf_env)
            if trace is None:
                fd, tmp = tempfile.mkstemp(prefix="gpool-run-", suffix=".csv")
                os.close(fd)
                os.unlink(tmp)  # the trace writes its header into an empty or absent file
                trace = tmp
        try:
            env = child_environment(conf=args.conf, trace=trace if tmp else None)
        except OSError as e:
            sys.stderr.write("%s\n" % e)
            return 127
        if args.print_env:
            for key in ("LD_PRELOAD", "PYTORCH_NO_CUDA_MEMORY_CACHING", "GPOOL_CONF",
                        "GPOOL_TRACE"):
                if key in env:
                    print("%s=%s" % (key, env[key]))
            return 0
        if not args.stats:
            try:
                os.execvpe(cmd[0], cmd, env)
            except OSError as e:
                sys.stderr.write("%s: %s: %s\n" % (prog, cmd[0], e.strerror))
                return 127
        try:
            child = subprocess.Popen(cmd, env=env)
        except OSError as e:
            sys.stderr.write("%s: %s: %s\n" % (prog, cmd[0], e.strerror))
            return 127
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the child gets ^C itself
        try:
            rc = child.wait()
        finally:
            signal.signal(signal.SIGINT, old)
        for line in summarize(trace):
            sys.stderr.write(line + "\n")
        return 128 - rc if rc < 0 else rc
    finally:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
