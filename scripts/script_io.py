"""What pytorch_reference.py, side_by_side.py and unpack_device_results.py share, to keep
mpbench's contract: bad input is one line and exit 2, a failure to write one line and exit 3, an
interruption one line and exit 130 (SIGINT) or 143 (SIGTERM), never a traceback; an output never
replaces an input, a link or a device, and is written whole or not at all. Standard library only.
"""
import contextlib
import json
import os
import signal
import stat
import sys
import tempfile


class ScriptError(Exception):
    """One line for the user; `code` is the exit status."""
    code = 3


class BadInput(ScriptError):
    """Bad arguments or input files: exit 2, as mpbench's."""
    code = 2


class Interrupted(BaseException):
    """SIGTERM as an exception, so that temporary files and folders are removed on the way out."""


def read_json(path):
    """The JSON document in `path`, a regular file."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{path}: not a regular file")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}")
    except ValueError as e:
        raise BadInput(f"{path}: not JSON: {e}")


def read_json_object(path):
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise BadInput(f"{path}: expected a JSON object, got {type(doc).__name__}")
    return doc


def check_output(path, inputs=()):
    """Refuses, before any work, an output that is a directory, lies in no directory, or is
    one of the inputs (also through a link)."""
    if os.path.isdir(path):
        raise BadInput(f"{path}: is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise BadInput(f"{path}: directory {parent} does not exist")
    for i in inputs:
        with contextlib.suppress(OSError):
            if os.path.samefile(path, i):
                raise BadInput(f"{path}: is also an input ({i}); choose another output")


def write_output(path, text, inputs=()):
    """`text` into `path`. A regular file (or a new one) is replaced whole: written under a
    temporary name of its own in the same folder, then renamed, keeping its mode (a new file gets
    the umask's); through a link, the link's target is, and the link stays. A FIFO or a device is
    written through, never replaced."""
    check_output(path, inputs)
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise ScriptError(f"{path}: cannot write: {e.strerror}")
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            with open(target, "w") as f:
                f.write(text)
            return
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(target) + ".tmp.",
                                   dir=os.path.dirname(target))
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, stat.S_IMODE(st.st_mode) if st else 0o666 & ~umask)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise ScriptError(f"{path}: cannot write: {e.strerror}")


def run_main(name, main):
    """sys.exit(main()), saying a ScriptError, Ctrl-C or SIGTERM in one line prefixed by name."""
    def on_term(*_):
        raise Interrupted()
    signal.signal(signal.SIGTERM, on_term)
    try:
        code = main()
    except ScriptError as e:
        print(f"{name}: {e}", file=sys.stderr)
        code = e.code
    except (KeyboardInterrupt, Interrupted) as e:
        print(f"{name}: interrupted", file=sys.stderr)
        code = 130 if isinstance(e, KeyboardInterrupt) else 143
    sys.exit(code)
